"""The event store: every Tab action with the policy version that took it, and its outcome.

SQLAlchemy Core over SQLite (WAL, one file under the data directory) by default, or
PostgreSQL by URL. Each write is its own committed transaction, so an event the API has
acknowledged survives the process being killed.

The tables are ``specialists.tab.schema``; Alembic migrations
(``specialists.tab.migrations``) bring a store to that shape each time it opens, stores
from before Alembic included. PostgreSQL connections are pooled (``PoolOptions``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from specialists.base import ConflictError, NotFoundError, SpecialistError

__all__ = ["ActionRecord", "ActionWriter", "EventStore", "Feedback", "LabelledEvent",
           "PoolOptions", "sqlite_url"]

log = logging.getLogger(__name__)

Outcome = Literal["accepted", "rejected", "partial"]
OUTCOMES = ("accepted", "rejected", "partial")


@dataclass
class ActionRecord:
    request_id: str
    policy_version: str
    action: str
    """What the policy did: ``none`` (nothing shown) or the chosen candidate / cut."""
    logprob: float
    shown: bool
    route: str = "tab"
    state_digest: str = ""
    features: dict[str, Any] | str | None = None
    """The observation (:func:`specialists.tab.features.to_features`), or it already
    written as JSON (:func:`~specialists.tab.features.features_json`, as the model worker
    hands it over)."""
    suggestion: str | None = None
    latency_ms: float = 0.0
    created_at: float | None = None
    kind: str | None = None
    """What the user saw: ``completion``, ``next_edit`` or ``jump`` (None: nothing)."""
    rule: str | None = None
    """Set when a rule, not the policy's own choice, decided what the user saw: ``rewrite``
    or ``jump`` in the policy's place, ``held`` (its insertion withheld, nothing shown).
    The policy's action is then credited as showing nothing (:func:`credited`)."""


@dataclass
class Feedback:
    """What the person did with a shown suggestion (``outcome``), and optionally the final
    report on what became of it (issue 35): ``chars_kept`` accepted characters still present
    ``kept_after`` keystrokes later, the accept ``undone``, Tab ``switched_off`` after it.
    The final report may come with the outcome or in a later feedback on the same request;
    it is recorded once."""

    request_id: str
    outcome: Outcome
    chars_accepted: int | None = None
    chars_kept: int | None = None
    kept_after: int | None = None
    undone: bool | None = None
    switched_off: bool | None = None

    @property
    def final(self) -> bool:
        """Does this feedback carry a final report?"""
        return self.chars_kept is not None or self.undone is not None or self.switched_off is not None

    def final_report(self, accepted: int) -> tuple[int | None, int | None, bool, bool]:
        """(chars_kept, kept_after, undone, switched_off) as stored: an undo keeps nothing;
        no more is kept than the ``accepted`` characters (as ``chars_accepted`` is cut to
        the suggestion's length)."""
        kept = 0 if self.undone else self.chars_kept
        return (None if kept is None else min(kept, accepted), self.kept_after,
                bool(self.undone), bool(self.switched_off))


@dataclass
class LabelledEvent:
    request_id: str
    policy_version: str
    action: str
    logprob: float
    shown: bool
    features: dict[str, Any]
    suggestion: str | None
    outcome: str | None
    """accepted | rejected | partial | expired; None when nothing was shown."""
    chars_accepted: int
    kind: str | None = None
    rule: str | None = None
    chars_kept: int | None = None
    """The final report's accepted characters still present (None: nothing reported)."""
    undone: bool = False
    """The final report says the accept was undone."""
    switched_off: bool = False
    """The final report says the person switched Tab off after this suggestion."""

    @property
    def credited(self) -> bool:
        """Did the policy's own choice reach the user? Only then does its outcome count for
        the action the policy took; else (nothing shown, or a rule decided) it showed nothing."""
        return self.shown and self.rule is None


def sqlite_url(data_dir: str | Path) -> str:
    path = Path(data_dir).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path / 'events.sqlite3'}"


@dataclass(frozen=True)
class PoolOptions:
    """Connection pooling for a server database (PostgreSQL); SQLite ignores it.

    Each server worker process holds its own pool, so the database sees up to
    ``workers x (size + max_overflow)`` connections: keep that under its
    ``max_connections`` (or put PgBouncer in front)."""

    size: int = 10
    """Connections kept open."""
    max_overflow: int = 20
    """Extra connections opened under a burst, closed when returned."""
    timeout_s: float = 30.0
    """How long a request waits for a free connection before failing."""
    recycle_s: float = 1800.0
    """Connections older than this are replaced (servers and proxies drop idle ones)."""
    pre_ping: bool = True
    """Test each connection as it leaves the pool, so a restarted database costs no error."""


class EventStore:
    """Actions, outcomes and deploys; safe to share across threads.

    Opening migrates the store to the newest schema (``specialists.tab.migrations``);
    ``schema_version`` is the Alembic revision it is at."""

    def __init__(self, url: str, *, feedback_timeout_s: float = 30.0,
                 pool: PoolOptions | None = None) -> None:
        from sqlalchemy import create_engine, event

        from specialists.tab import schema
        from specialists.tab.migrations import upgrade

        self.url = url
        self.feedback_timeout_s = feedback_timeout_s
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            pool = pool or PoolOptions()
            kwargs.update(pool_size=pool.size, max_overflow=pool.max_overflow,
                          pool_timeout=pool.timeout_s, pool_recycle=pool.recycle_s,
                          pool_pre_ping=pool.pre_ping)
        self.engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            self.schema_version = upgrade(self.engine)
        except BaseException:
            self.engine.dispose()
            raise
        self.actions = schema.actions
        self.outcomes = schema.outcomes
        self.deploys = schema.deploys
        self._checkpointer = _Checkpointer(self.engine) if url.startswith("sqlite") else None
        self._insert_positional: tuple[str, list[str]] | None = None
        if url.startswith("sqlite"):
            # The action insert compiled once and its rows handed to sqlite3's executemany
            # as tuples: SQLAlchemy's per-row parameter processing held the GIL for most of
            # each group commit, which every Tab answer waits for (issue 17). SQLite needs
            # no conversion for these columns (text, float, int, bool, None).
            compiled = self.actions.insert().compile(dialect=self.engine.dialect)
            self._insert_positional = (str(compiled), list(compiled.positiontup or []))

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self.engine.dispose()

    # -- writes ---------------------------------------------------------------------------
    def _action_row(self, rec: ActionRecord) -> dict[str, Any]:
        now = rec.created_at if rec.created_at is not None else time.time()
        return {"request_id": rec.request_id, "created_at": now, "route": rec.route,
                "policy_version": rec.policy_version, "state_digest": rec.state_digest,
                "features": _features_text(rec.features), "action": rec.action,
                "logprob": float(rec.logprob), "suggestion": rec.suggestion,
                "shown": rec.shown, "latency_ms": float(rec.latency_ms),
                "expires_at": now + self.feedback_timeout_s if rec.shown else None,
                "kind": rec.kind if rec.shown else None, "rule": rec.rule}

    def record_action(self, rec: ActionRecord) -> None:
        from sqlalchemy.exc import IntegrityError

        try:
            with self.engine.begin() as conn:
                conn.execute(self.actions.insert().values(**self._action_row(rec)))
        except IntegrityError:
            raise _used(rec) from None

    def record_actions(self, recs: list[ActionRecord]) -> list[Exception | None]:
        """Store several actions in one transaction; one error (or None) per action. A
        duplicate request_id fails only its own action: the group is then retried one by one."""
        from sqlalchemy.exc import IntegrityError

        if not recs:
            return []
        try:
            with self.engine.begin() as conn:
                if self._insert_positional is not None:  # SQLite: straight to the driver
                    sql, order = self._insert_positional
                    conn.exec_driver_sql(sql, [tuple(row[k] for k in order)
                                               for row in map(self._action_row, recs)])
                else:
                    conn.execute(self.actions.insert(), [self._action_row(r) for r in recs])
            return [None] * len(recs)
        except IntegrityError:
            pass
        errors: list[Exception | None] = []
        for rec in recs:
            try:
                self.record_action(rec)
                errors.append(None)
            except ConflictError as exc:
                errors.append(exc)
        return errors

    def record_feedback(self, fb: Feedback, now: float | None = None) -> bool:
        """Store one outcome, and the final report it carries. True if anything new was
        stored, False if the same feedback was already stored.

        A final report (``Feedback.final``) may come with the outcome or later, repeating
        the outcome (its ``chars_accepted`` may then be left out); it is stored once.
        Raises NotFoundError (unknown id), ConflictError (nothing was shown, expired, a
        different outcome or a different final report already recorded, a final report that
        contradicts itself or its outcome) and SpecialistError (an outcome we do not know).
        """
        from sqlalchemy import select
        from sqlalchemy.exc import IntegrityError

        if fb.outcome not in OUTCOMES:
            raise SpecialistError(f"outcome must be one of {list(OUTCOMES)}, got {fb.outcome!r}",
                             param="outcome")
        _check_final(fb)
        now = time.time() if now is None else now
        o = self.outcomes
        with self.engine.begin() as conn:
            action = conn.execute(select(self.actions.c.shown, self.actions.c.expires_at,
                                         self.actions.c.suggestion)
                                  .where(self.actions.c.request_id == fb.request_id)).first()
            if action is None:
                raise NotFoundError(f"no tab request with id {fb.request_id!r}; send the request_id "
                                    "that /v1/tab returned (a server whose tab specialist "
                                    "has log_features off logs no decision)",
                                    param="request_id")
            if not action.shown:
                raise ConflictError(f"request {fb.request_id!r} showed no suggestion; there is "
                               "nothing to accept or reject", param="request_id")
            chars = _chars(fb, action.suggestion)
            existing = conn.execute(select(o.c.outcome, o.c.chars_accepted, o.c.chars_kept,
                                           o.c.kept_after, o.c.undone, o.c.switched_off,
                                           o.c.final_at)
                                    .where(o.c.request_id == fb.request_id)).first()
            if existing is not None:
                if not _same_or_conflict(fb, chars, existing):
                    return False
                return self._record_final(conn, fb, existing, now)
            if action.expires_at is not None and now > action.expires_at:
                conn.execute(o.insert().values(
                    request_id=fb.request_id, outcome="expired", chars_accepted=0,
                    created_at=now, source="timeout"))
                expired = True
            else:
                expired = False
                final: dict[str, Any] = {}
                if fb.final:
                    kept, after, undone, off = fb.final_report(chars)
                    final = {"chars_kept": kept, "kept_after": after, "undone": undone,
                             "switched_off": off, "final_at": now}
                try:
                    conn.execute(o.insert().values(
                        request_id=fb.request_id, outcome=fb.outcome, chars_accepted=chars,
                        created_at=now, source="client", **final))
                except IntegrityError:  # a concurrent duplicate won the race
                    return False
        if expired:
            raise ConflictError(f"feedback for {fb.request_id!r} came after its "
                           f"{self.feedback_timeout_s:g}s window; it was counted as rejected",
                           param="request_id")
        return True

    def _record_final(self, conn: Any, fb: Feedback, existing: Any, now: float) -> bool:
        """A final report for an outcome already stored: stored once (True), the same one
        again is a duplicate (False), a different one a conflict."""
        from sqlalchemy import select

        o = self.outcomes
        report = fb.final_report(int(existing.chars_accepted))
        if existing.final_at is None:
            kept, after, undone, off = report
            done = conn.execute(o.update().where(o.c.request_id == fb.request_id)
                                .where(o.c.final_at.is_(None))
                                .values(chars_kept=kept, kept_after=after, undone=undone,
                                        switched_off=off, final_at=now))
            if done.rowcount == 1:
                return True
            existing = conn.execute(select(o.c.chars_kept, o.c.kept_after, o.c.undone,
                                           o.c.switched_off)
                                    .where(o.c.request_id == fb.request_id)).first()
        stored = (existing.chars_kept, existing.kept_after, bool(existing.undone),
                  bool(existing.switched_off))
        if stored == report:
            return False
        raise ConflictError(f"request {fb.request_id!r} already has a final report "
                            f"(chars_kept={stored[0]}, kept_after={stored[1]}, "
                            f"undone={str(stored[2]).lower()}, "
                            f"switched_off={str(stored[3]).lower()}); a final report is "
                            "recorded once: send everything it says in one feedback",
                            param="request_id")

    def expire_stale(self, now: float | None = None) -> int:
        """Count every shown suggestion past its window without feedback as rejected."""
        from sqlalchemy import and_, exists, insert, literal, select

        now = time.time() if now is None else now
        a, o = self.actions, self.outcomes
        stale = (select(a.c.request_id, literal("expired"), literal(0), literal(now),
                        literal("timeout"))
                 .where(and_(a.c.shown.is_(True), a.c.expires_at < now,
                             ~exists().where(o.c.request_id == a.c.request_id))))
        statement = insert(o).from_select(
            ["request_id", "outcome", "chars_accepted", "created_at", "source"], stale)
        with self.engine.begin() as conn:
            # rowcount of INSERT ... SELECT is -1 on psycopg; count the returned ids instead
            return len(conn.execute(statement.returning(o.c.request_id)).all())

    def record_deploy(self, version: str, event: str, **detail: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(self.deploys.insert().values(created_at=time.time(), version=version,
                                                      event=event, detail=json.dumps(detail)))

    # -- reads ----------------------------------------------------------------------------
    def labelled(self, version: str, since: float | None = None) -> list[LabelledEvent]:
        """Version ``version``'s events that have their label: nothing shown, or an outcome
        (``since``: only those decided at or after that time, epoch seconds)."""
        from sqlalchemy import or_, select

        a, o = self.actions, self.outcomes
        query = (select(a, o.c.outcome, o.c.chars_accepted, o.c.chars_kept, o.c.undone,
                        o.c.switched_off)
                 .select_from(a.outerjoin(o, o.c.request_id == a.c.request_id))
                 .where(a.c.policy_version == version)
                 .where(or_(a.c.shown.is_(False), o.c.outcome.is_not(None)))
                 .order_by(a.c.created_at))
        if since is not None:
            query = query.where(a.c.created_at >= since)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [LabelledEvent(r.request_id, r.policy_version, r.action, r.logprob, r.shown,
                              json.loads(r.features), r.suggestion, r.outcome,
                              int(r.chars_accepted or 0), r.kind, r.rule,
                              None if r.chars_kept is None else int(r.chars_kept),
                              bool(r.undone), bool(r.switched_off)) for r in rows]

    def version_of(self, request_id: str) -> str | None:
        """The policy version that answered ``request_id`` (``None``: no such request)."""
        from sqlalchemy import select

        with self.engine.connect() as conn:
            return conn.execute(select(self.actions.c.policy_version)
                                .where(self.actions.c.request_id == request_id)).scalar()

    def count_other_versions(self, version: str) -> int:
        """Events drawn by any other policy version: off-policy for ``version``."""
        from sqlalchemy import func, select

        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self.actions)
                                    .where(self.actions.c.policy_version != version)).scalar()
                       or 0)

    def count_outside(self, versions: list[str]) -> int:
        """Events drawn by any version not in ``versions``: what a trainer using those refuses."""
        from sqlalchemy import func, select

        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self.actions)
                                    .where(self.actions.c.policy_version.not_in(versions))).scalar()
                       or 0)

    def pending(self) -> int:
        """Shown suggestions still waiting for feedback."""
        from sqlalchemy import exists, func, select

        a, o = self.actions, self.outcomes
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(a)
                                    .where(a.c.shown.is_(True))
                                    .where(~exists().where(o.c.request_id == a.c.request_id)))
                       .scalar() or 0)

    def counts(self) -> dict[str, int]:
        from sqlalchemy import func, select

        with self.engine.connect() as conn:
            actions = conn.execute(select(func.count()).select_from(self.actions)).scalar()
            outcomes = conn.execute(select(func.count()).select_from(self.outcomes)).scalar()
        return {"actions": int(actions or 0), "outcomes": int(outcomes or 0)}

    def version_stats(self, accept: float = 0.75, reject: float = -0.25,
                      none: float = 0.0, since: float | None = None,
                      kept: Any = None) -> list[dict[str, Any]]:
        """Per policy version, over its labelled events (``since``: decided at or after that
        time): show rate, accept rate, reward of the policy's own choices (what a rule showed
        in their place counts as nothing shown, as the trainer counts it: see
        :meth:`kind_stats` for everything the users saw); oldest version first (numbered
        versions in number order). Beside the accept key's reward (``accept``/``reject``),
        what was kept (issue 35): characters kept (the final report's, else those accepted;
        none of an undone accept), undone accepts, Tab switch-offs and the reward of what was
        kept (``kept``: a :class:`~specialists.tab.rewards.KeptReward`, default its terms)."""
        from sqlalchemy import and_, case, func, select

        from specialists.tab.rewards import KeptReward

        kept = kept or KeptReward()
        a, o = self.actions, self.outcomes
        own = and_(a.c.shown.is_(True), a.c.rule.is_(None))
        accepted = and_(own, o.c.outcome.in_(("accepted", "partial")))
        undone = and_(accepted, o.c.undone.is_(True))
        chars = case((undone, 0), (and_(accepted, o.c.chars_kept.is_not(None)), o.c.chars_kept),
                     (accepted, o.c.chars_accepted), else_=0)
        query = (select(a.c.policy_version,
                        func.count().label("n"),
                        func.sum(case((own, 1), else_=0)).label("shown"),
                        func.sum(case((accepted, 1), else_=0)).label("accepted"),
                        func.sum(case((undone, 1), else_=0)).label("undone"),
                        func.sum(case((and_(own, o.c.switched_off.is_(True)), 1), else_=0))
                        .label("switched_off"),
                        func.sum(chars).label("chars_kept"))
                 .select_from(a.outerjoin(o, o.c.request_id == a.c.request_id))
                 .where((a.c.shown.is_(False)) | (o.c.outcome.is_not(None)))
                 .group_by(a.c.policy_version))
        if since is not None:
            query = query.where(a.c.created_at >= since)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        out = []
        for r in rows:
            n, shown, acc = int(r.n), int(r.shown or 0), int(r.accepted or 0)
            undos, offs, kept_chars = int(r.undone or 0), int(r.switched_off or 0), int(r.chars_kept or 0)
            reward = acc * accept + (shown - acc) * reject + (n - shown) * none
            reward_kept = ((shown - acc) * kept.dismiss + undos * kept.undo
                           + kept_chars * kept.per_char + offs * kept.off + (n - shown) * kept.none)
            out.append({"version": r.policy_version, "events": n, "shown": shown,
                        "accepted": acc, "show_rate": shown / n,
                        "accept_rate": acc / shown if shown else 0.0,
                        "reward_per_request": reward / n,
                        "undone": undos, "switched_off": offs, "chars_kept": kept_chars,
                        "chars_kept_per_request": kept_chars / n,
                        "kept_reward_per_request": reward_kept / n})
        out.sort(key=lambda row: (0, int(row["version"]), "") if str(row["version"]).isdigit()
                 else (1, 0, str(row["version"])))
        return out

    def kind_stats(self, since: float | None = None) -> list[dict[str, Any]]:
        """What the users saw, per kind (``completion``, ``next_edit``, ``jump``) and who
        chose it (``policy`` or the rule's name), over shown suggestions that have their
        outcome: shown, accepted (accepted or partial), characters accepted."""
        from sqlalchemy import case, func, select

        a, o = self.actions, self.outcomes
        query = (select(a.c.kind, a.c.rule, func.count().label("shown"),
                        func.sum(case((o.c.outcome.in_(("accepted", "partial")), 1), else_=0))
                        .label("accepted"),
                        func.sum(o.c.chars_accepted).label("chars"))
                 .select_from(a.join(o, o.c.request_id == a.c.request_id))
                 .where(a.c.shown.is_(True))
                 .group_by(a.c.kind, a.c.rule))
        if since is not None:
            query = query.where(a.c.created_at >= since)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        out = [{"kind": r.kind or "completion", "by": r.rule or "policy", "shown": int(r.shown),
                "accepted": int(r.accepted or 0), "chars_accepted": int(r.chars or 0)}
               for r in rows]
        out.sort(key=lambda row: (row["kind"], row["by"]))
        return out

    def deploy_log(self, limit: int = 50) -> list[dict[str, Any]]:
        from sqlalchemy import select

        d = self.deploys
        with self.engine.connect() as conn:
            rows = conn.execute(select(d).order_by(d.c.id.desc()).limit(limit)).all()
        return [{"id": r.id, "created_at": r.created_at, "version": r.version,
                 "event": r.event, **json.loads(r.detail)} for r in rows]


def _chars(fb: Feedback, suggestion: str | None) -> int:
    if fb.outcome == "accepted":
        full = len(suggestion or "")
        return full if fb.chars_accepted is None else max(0, min(fb.chars_accepted, full))
    if fb.outcome == "partial":
        return max(0, fb.chars_accepted or 0)
    return 0


def _check_final(fb: Feedback) -> None:
    """A final report that contradicts itself or its outcome: a conflict (409), whatever is
    stored; each part of it alone is valid."""
    if fb.outcome == "rejected" and (fb.chars_kept is not None or fb.undone is not None):
        raise ConflictError(f"request {fb.request_id!r}: chars_kept and undone report on "
                              "accepted text; a rejected suggestion takes only switched_off",
                              param="chars_kept" if fb.chars_kept is not None else "undone")
    if fb.undone and fb.chars_kept:
        raise ConflictError(f"request {fb.request_id!r}: an undone accept keeps no "
                              f"characters (got chars_kept={fb.chars_kept}); send undone "
                              "alone, or chars_kept alone", param="chars_kept")
    if fb.kept_after is not None and fb.chars_kept is None:
        raise ConflictError(f"request {fb.request_id!r}: kept_after says when chars_kept "
                              "was counted; send chars_kept with it", param="kept_after")
    for name in ("chars_kept", "kept_after"):
        value = getattr(fb, name)
        if value is not None and value < 0:
            raise SpecialistError(f"{name} must be at least 0, got {value}", param=name)


def _same_or_conflict(fb: Feedback, chars: int, existing: Any) -> bool:
    """True when ``fb`` repeats the stored outcome and carries a final report to look at;
    False for a plain duplicate; a different outcome is a conflict. A final report may
    leave ``chars_accepted`` out: only its outcome must match."""
    if existing.outcome == "expired":
        raise ConflictError(f"feedback for {fb.request_id!r} came after its window; it was "
                       "counted as rejected", param="request_id")
    loose = fb.final and fb.chars_accepted is None
    if existing.outcome == fb.outcome and (loose or int(existing.chars_accepted) == chars):
        return fb.final
    raise ConflictError(f"request {fb.request_id!r} already has outcome {existing.outcome!r}; "
                   f"feedback is recorded once", param="request_id")


def _used(rec: ActionRecord) -> ConflictError:
    return ConflictError(f"request_id {rec.request_id!r} was already used; send a new id "
                         "per request (or none, and the server issues one)", param="request_id")


class ActionWriter:
    """Group commit for the API's action rows (issue 17).

    ``write`` queues a row; a thread of its own stores everything queued in one transaction
    and then calls each row's ``done`` with None (committed) or the error. A caller that
    answers only after ``done`` keeps the store's promise — an acknowledged answer's row is
    committed, so feedback finds it and a kill loses nothing — while the store pays one
    transaction per group instead of one per request, off the event loop.
    """

    def __init__(self, store: EventStore, max_rows: int = 256) -> None:
        self.store = store
        self.max_rows = max_rows
        self._queue: deque[tuple[ActionRecord, Callable[[Exception | None], None]]] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tab-actions", daemon=True)
        self._thread.start()

    def write(self, rec: ActionRecord, done: Callable[[Exception | None], None]) -> None:
        with self._cv:
            if self._closed:
                raise RuntimeError("the action writer is closed")
            self._queue.append((rec, done))
            self._cv.notify()

    def close(self, timeout: float = 10.0) -> None:
        """Store what is queued, then stop."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    return
                group = [self._queue.popleft() for _ in range(min(self.max_rows, len(self._queue)))]
            try:
                errors = self.store.record_actions([rec for rec, _ in group])
            except Exception as exc:  # the store is down: every caller hears of it
                errors = [exc] * len(group)
            for (_, done), error in zip(group, errors):
                try:
                    done(error)
                except Exception:  # a broken callback must not stop the writer
                    log.exception("tab: an action-row callback failed")


def _features_text(features: dict[str, Any] | str | None) -> str:
    if isinstance(features, str):
        return features
    import orjson

    return orjson.dumps(features or {}, option=orjson.OPT_SERIALIZE_NUMPY).decode()


class _Checkpointer:
    """Moves SQLite's write-ahead log into the database file from a thread of its own.

    SQLite's own automatic checkpoint runs inside the COMMIT that crosses its threshold, so
    that commit — and every Tab answer waiting for its row in that group — waited for the
    copy and the file sync: 0.1–1 s stalls every few seconds with 16 editors typing
    (issue 17). Connections of the store turn it off (``wal_autocheckpoint=0``) and this
    thread runs PASSIVE checkpoints instead, which never block a writer; when it has
    copied every frame, the next commit starts the log from its beginning again."""

    def __init__(self, engine: Any, every_s: float = 1.0) -> None:
        self.engine, self.every_s = engine, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.checkpoint()

    def checkpoint(self) -> None:
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception as exc:  # a busy or closing store: the next turn tries again
            log.debug("sqlite checkpoint skipped: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.checkpoint()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    # WAL: readers never block the writer; NORMAL sync keeps committed data through a
    # process kill (only an OS crash can lose the last transactions).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA wal_autocheckpoint=0")  # _Checkpointer does it off the commit path
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
