"""Keys for the teams that share one server (issue 37): the admin key, inference keys, and
virtual keys with budgets and rate limits.

Who a request is, is decided once, by ``router.app.GuardMiddleware`` through
:class:`KeyGate` (only when the server has keys; without any, on loopback, everything is
open as before):

- the **admin key** (``server.admin_keys``, ``COMPLEMENT_ADMIN_KEY``): every endpoint,
  the admin ones (:data:`ADMIN_PATHS`: deploy, rollback, canary, key management) included;
- an **inference key** (``server.api_keys``, ``COMPLEMENT_API_KEY``): every endpoint but
  the admin ones (403);
- a **virtual key** (``POST /key/generate``, on a server with an admin key): like an
  inference key, within its limits — the routes and models it may use (403), its budget
  (402 naming it and the amounts), its requests and tokens per minute (429 with
  ``Retry-After``).

Virtual keys live in the event store's database (``specialists.tab.schema.virtual_keys``),
stored as the SHA-256 of the key: a 256-bit random key needs no slow hash, and a leaked
table gives no key. A key is looked up by its hash in a per-process cache
(``server.key_cache_s``; this process's updates and deletes drop their entry at once),
so a request pays a hash and a dict lookup.

Budgets hold under concurrency and restarts. A request that may cost something (chat,
edit) first reserves its worst-case cost: one transaction that locks the key's row, sums
its live reservations and inserts its own only if ``spend + held + worst case`` stays
within ``max_budget`` — so concurrent requests, in one process or many, never spend past
the budget by more than the gap between a worst case and its real cost. When the request
ends, one transaction deletes the reservation and adds the real cost to ``spend`` — before
the answer leaves, so an acknowledged cost is never lost to a kill. A reservation left by
a killed server stops counting at its expiry. Requests that cost nothing (Tab, apply,
retrieve) touch the database not at all: their budget check reads the cached spend.

Rate limits are a sliding minute per key, in memory, per server process: with
``--workers N`` a key gets up to N times its rpm/tpm (documented in the README).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal

from router.errors import BudgetExceeded, Forbidden, NotFound, RateLimited, Unauthorized

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["ADMIN", "ADMIN_PATHS", "AREAS", "INFERENCE", "KEY_PREFIX", "Busy", "Charge",
           "KeyGate", "KeyStore", "VirtualKey", "charge_of", "hash_key", "is_admin_path",
           "new_key", "parse_duration", "unknown_key"]

KEY_PREFIX = "sk-cmp-"
#: Paths that change what others are served: the admin key's alone when the server has keys.
ADMIN_PATHS = frozenset({"/v1/tab/deploy", "/v1/tab/canary", "/v1/tab/canary/promote",
                         "/v1/tab/canary/abort"})
ADMIN_PREFIXES = ("/key/",)
#: What ``allowed_routes`` may name: the API's areas (``router.app._PATH_ROUTES``), and any
#: a config's ``endpoints:`` adds.
AREAS = ("chat", "tab", "feedback", "apply", "edit", "retrieval", "system")
ADMIN: Literal["admin"] = "admin"
INFERENCE: Literal["inference"] = "inference"
RESERVATION_SLACK_S = 60.0
"""A reservation outlives its request's latency budget by this much before it stops
counting (the request is surely over, or its server was killed)."""


def new_key() -> str:
    """A fresh virtual key: the prefix and 256 random bits."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str | bytes) -> str:
    return hashlib.sha256(key if isinstance(key, bytes) else key.encode()).hexdigest()


def alias_of(key: str) -> str:
    """What tells a key apart without giving it away: ``sk-cmp-AbCd...wXyZ``."""
    return f"{key[:len(KEY_PREFIX) + 4]}...{key[-4:]}"


def is_admin_path(path: str) -> bool:
    return path in ADMIN_PATHS or path.startswith(ADMIN_PREFIXES)


_DURATION = re.compile(r"^([1-9][0-9]{0,8})([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``"30s"``, ``"15m"``, ``"12h"``, ``"30d"`` (LiteLLM's ``duration``) in seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"duration {text!r} is not a whole number of seconds, minutes, "
                         "hours or days: write e.g. '30s', '15m', '12h' or '30d'")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass
class VirtualKey:
    key_hash: str
    key_alias: str
    key_name: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    expires_at: float | None = None
    revoked_at: float | None = None
    max_budget: float | None = None
    spend: float = 0.0
    requests: int = 0
    """Requests that settled a cost in the database (those that cost nothing are not written)."""
    rpm_limit: int | None = None
    tpm_limit: int | None = None
    allowed_routes: list[str] | None = None
    models: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        """What ``/key/info`` and ``complement keys`` show (never the key itself)."""
        return {"token": self.key_hash, "key_alias": self.key_alias, "key_name": self.key_name,
                "spend": self.spend, "max_budget": self.max_budget,
                "budget_left": None if self.max_budget is None
                else max(self.max_budget - self.spend, 0.0),
                "rpm_limit": self.rpm_limit, "tpm_limit": self.tpm_limit,
                "allowed_routes": self.allowed_routes, "models": self.models,
                "metadata": self.metadata, "created_at": self.created_at,
                "expires": self.expires_at, "revoked_at": self.revoked_at,
                "requests_charged": self.requests}

    def refusal(self, now: float) -> Unauthorized | None:
        if self.revoked_at is not None:
            return Unauthorized(f"key {self.key_alias} was revoked (POST /key/delete); ask "
                                "the server's admin for a new one", code="key_revoked")
        if self.expires_at is not None and now >= self.expires_at:
            return Unauthorized(f"key {self.key_alias} expired at {_iso(self.expires_at)}; "
                                "ask the server's admin to extend it (POST /key/update with "
                                "a duration) or for a new one", code="key_expired")
        return None

    def over_budget(self) -> BudgetExceeded | None:
        if self.max_budget is not None and self.spend >= self.max_budget:
            return _over_budget(self, self.spend, 0.0, 0.0)
        return None


def _over_budget(key: VirtualKey, spend: float, held: float, worst: float) -> BudgetExceeded:
    assert key.max_budget is not None
    if worst > 0:
        why = (f"this request's worst-case cost ${worst:.6f} on top of spend ${spend:.6f}"
               f"{f' and ${held:.6f} held by requests in flight' if held else ''} would pass "
               f"its max_budget ${key.max_budget:.6f}")
        fix = "ask for fewer tokens (max_tokens), or ask the admin to raise max_budget"
    else:
        why = f"its spend ${spend:.6f} has reached its max_budget ${key.max_budget:.6f}"
        fix = "ask the admin to raise max_budget (POST /key/update)"
    return BudgetExceeded(f"key {key.key_alias}: {why}; {fix}", code="key_budget_exceeded",
                          extra={"max_budget": key.max_budget, "spend": spend,
                                 "held": held, "worst_case_cost": worst})


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _json_list(text: str | None) -> list[str] | None:
    return None if text is None else list(json.loads(text))


class KeyStore:
    """Virtual keys in the event store's database (``engine``); safe to share across threads."""

    def __init__(self, engine: "Engine") -> None:
        from specialists.tab.schema import key_reservations, virtual_keys

        self.engine = engine
        self.keys = virtual_keys
        self.reservations = key_reservations
        self.drop_expired()
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._sqlite = _SqliteSpending(database) if database not in (None, "", ":memory:") \
            else None

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()

    # -- management --------------------------------------------------------------------------
    def create(self, *, key: str | None = None, **fields: Any) -> tuple[str, VirtualKey]:
        """A new key with ``fields`` (those of :meth:`update`); the key and its record."""
        key = key or new_key()
        now = time.time()
        row = {"key_hash": hash_key(key), "key_alias": alias_of(key), "created_at": now,
               "updated_at": now, "spend": 0.0, "requests": 0, "key_metadata": "{}",
               **self._columns(fields)}
        with self.engine.begin() as conn:
            conn.execute(self.keys.insert().values(**row))
        found = self.get(row["key_hash"])
        assert found is not None
        return key, found

    def get(self, key_hash: str) -> VirtualKey | None:
        from sqlalchemy import select

        with self.engine.connect() as conn:
            row = conn.execute(select(self.keys).where(self.keys.c.key_hash == key_hash)).first()
        return None if row is None else _from_row(row)

    def all(self) -> list[VirtualKey]:
        from sqlalchemy import select

        with self.engine.connect() as conn:
            rows = conn.execute(select(self.keys).order_by(self.keys.c.created_at)).all()
        return [_from_row(r) for r in rows]

    def update(self, key_hash: str, **fields: Any) -> VirtualKey:
        """Set ``fields``: ``key_name``, ``max_budget``, ``rpm_limit``, ``tpm_limit``,
        ``allowed_routes``, ``models``, ``metadata``, ``expires_at``, ``spend`` (a reset)."""
        from sqlalchemy import update

        values = {"updated_at": time.time(), **self._columns(fields)}
        with self.engine.begin() as conn:
            done = conn.execute(update(self.keys).where(self.keys.c.key_hash == key_hash)
                                .values(**values)).rowcount
        if not done:
            raise unknown_key(key_hash)
        found = self.get(key_hash)
        assert found is not None
        return found

    def revoke(self, key_hashes: Iterable[str]) -> list[str]:
        """Revoke each key (its record and spend stay); the hashes revoked now."""
        from sqlalchemy import update

        hashes = list(key_hashes)
        now = time.time()
        with self.engine.begin() as conn:
            for h in hashes:
                if not conn.execute(update(self.keys).where(self.keys.c.key_hash == h)
                                    .values(revoked_at=now, updated_at=now)).rowcount:
                    raise unknown_key(h)  # the transaction rolls back: all or none
        return hashes

    @staticmethod
    def _columns(fields: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name in ("allowed_routes", "models"):
                out[name] = None if value is None else json.dumps(list(value))
            elif name == "metadata":
                out["key_metadata"] = json.dumps(value or {})
            elif name in ("key_name", "max_budget", "rpm_limit", "tpm_limit", "expires_at",
                          "spend"):
                out[name] = value
            else:
                raise ValueError(f"unknown key field {name!r}")
        return out

    # -- spending ----------------------------------------------------------------------------
    def reserve(self, key_hash: str, amount: float, ttl_s: float, wait: bool = True) -> str:
        """Hold ``amount`` USD of the key's budget for one request; its reservation id.
        Raises :class:`BudgetExceeded` when spend, the live reservations and ``amount``
        would pass ``max_budget``. ``wait=False``: raise :class:`Busy` at once rather than
        wait for the database (the caller is the event loop; it tries again in a thread)."""
        from sqlalchemy import delete, func, select, update

        if self._sqlite is not None:
            return self._sqlite.reserve(key_hash, amount, ttl_s, wait)
        if not wait:
            raise Busy()
        k, r = self.keys, self.reservations
        now = time.time()
        with self.engine.begin() as conn:
            # The key's row is locked first (PostgreSQL: its row lock; SQLite: the database's
            # write lock, taken by a transaction's first write), so two reservations for one
            # key never both read the totals from before the other's.
            if not conn.execute(update(k).where(k.c.key_hash == key_hash)
                                .values(updated_at=k.c.updated_at)).rowcount:
                raise unknown_key(key_hash)
            row = conn.execute(select(k).where(k.c.key_hash == key_hash)).first()
            conn.execute(delete(r).where(r.c.key_hash == key_hash, r.c.expires_at <= now))
            held = float(conn.execute(select(func.coalesce(func.sum(r.c.amount), 0.0))
                                      .where(r.c.key_hash == key_hash)).scalar() or 0.0)
            key = _from_row(row)
            if key.max_budget is not None and key.spend + held + amount > key.max_budget:
                raise _over_budget(key, key.spend, held, amount)
            rid = uuid.uuid4().hex
            conn.execute(r.insert().values(id=rid, key_hash=key_hash, amount=amount,
                                           created_at=now, expires_at=now + ttl_s))
        return rid

    def settle(self, key_hash: str, reservation: str | None, cost: float,
               wait: bool = True) -> float:
        """End one request: drop its reservation and add its real ``cost`` to the key's
        spend, in one transaction; the key's spend after. ``wait``: as for :meth:`reserve`."""
        from sqlalchemy import delete, select, update

        if self._sqlite is not None:
            return self._sqlite.settle(key_hash, reservation, cost, wait)
        if not wait:
            raise Busy()
        k, r = self.keys, self.reservations
        with self.engine.begin() as conn:
            conn.execute(update(k).where(k.c.key_hash == key_hash)
                         .values(spend=k.c.spend + cost, requests=k.c.requests + 1))
            if reservation is not None:
                conn.execute(delete(r).where(r.c.id == reservation))
            return float(conn.execute(select(k.c.spend).where(k.c.key_hash == key_hash))
                         .scalar() or 0.0)

    def drop_expired(self) -> int:
        """Delete reservations past their expiry (left by killed servers); how many."""
        from sqlalchemy import delete

        with self.engine.begin() as conn:
            return int(conn.execute(delete(self.reservations).where(
                self.reservations.c.expires_at <= time.time())).rowcount or 0)

    def held(self, key_hash: str) -> float:
        """USD held by live reservations of the key."""
        from sqlalchemy import func, select

        r = self.reservations
        with self.engine.connect() as conn:
            return float(conn.execute(select(func.coalesce(func.sum(r.c.amount), 0.0))
                                      .where(r.c.key_hash == key_hash,
                                             r.c.expires_at > time.time())).scalar() or 0.0)


class Busy(Exception):
    """The database's write lock is taken: not waited for (``wait=False``)."""


class _SqliteSpending:
    """Reserve and settle on SQLite through the driver, on two connections of their own.

    A commit here takes some 20 µs; SQLAlchemy's statement building and pool cost ten times
    that, and a hop to a worker thread more again (issue 37's budget: 0.2 ms a request).
    So the event loop runs a transaction itself on the ``fast`` connection, which never
    waits for the write lock (busy timeout 0): when another writer holds it (the Tab
    action writer, another server process), :class:`Busy` sends the caller to a thread,
    which runs it on the ``slow`` connection, which waits. Each transaction starts with
    ``BEGIN IMMEDIATE``, holding the write lock before it reads the totals it checks."""

    def __init__(self, path: str) -> None:
        import sqlite3
        import threading

        self.fast = sqlite3.connect(path, timeout=0, isolation_level=None,
                                    check_same_thread=False)
        self.slow = sqlite3.connect(path, timeout=30, isolation_level=None,
                                    check_same_thread=False)
        for conn, busy_ms in ((self.fast, 0), (self.slow, 30000)):
            conn.execute("PRAGMA synchronous=NORMAL")  # as the event store: a kill loses nothing
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the store's own thread checkpoints
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
        self._fast_lock = threading.Lock()
        self._slow_lock = threading.Lock()

    def close(self) -> None:
        self.fast.close()
        self.slow.close()

    def _run(self, wait: bool, body: Any) -> Any:
        import sqlite3

        lock, conn = (self._slow_lock, self.slow) if wait else (self._fast_lock, self.fast)
        if not lock.acquire(blocking=wait):
            raise Busy()
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not wait and "locked" in str(exc):
                    raise Busy() from None
                raise
            try:
                result = body(conn)
                conn.execute("COMMIT")
                return result
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            lock.release()

    def reserve(self, key_hash: str, amount: float, ttl_s: float, wait: bool) -> str:
        now = time.time()

        def body(conn: Any) -> str:
            row = conn.execute(
                "SELECT key_alias, spend, max_budget, (SELECT COALESCE(SUM(amount), 0.0) "
                "FROM key_reservations WHERE key_hash = ? AND expires_at > ?) "
                "FROM virtual_keys WHERE key_hash = ?", (key_hash, now, key_hash)).fetchone()
            if row is None:
                raise unknown_key(key_hash)
            alias, spend, max_budget, held = row
            if max_budget is not None and spend + held + amount > max_budget:
                key = VirtualKey(key_hash, alias, max_budget=max_budget, spend=spend)
                raise _over_budget(key, spend, held, amount)
            rid = uuid.uuid4().hex
            conn.execute("INSERT INTO key_reservations (id, key_hash, amount, created_at, "
                         "expires_at) VALUES (?, ?, ?, ?, ?)",
                         (rid, key_hash, amount, now, now + ttl_s))
            return rid

        return str(self._run(wait, body))

    def settle(self, key_hash: str, reservation: str | None, cost: float, wait: bool) -> float:
        def body(conn: Any) -> float:
            if reservation is not None:
                conn.execute("DELETE FROM key_reservations WHERE id = ?", (reservation,))
            row = conn.execute("UPDATE virtual_keys SET spend = spend + ?, requests = "
                               "requests + 1 WHERE key_hash = ? RETURNING spend",
                               (cost, key_hash)).fetchone()
            return float(row[0]) if row else 0.0

        return float(self._run(wait, body))


def _from_row(row: Any) -> VirtualKey:
    return VirtualKey(key_hash=row.key_hash, key_alias=row.key_alias, key_name=row.key_name,
                      created_at=row.created_at, updated_at=row.updated_at,
                      expires_at=row.expires_at, revoked_at=row.revoked_at,
                      max_budget=row.max_budget, spend=float(row.spend),
                      requests=int(row.requests), rpm_limit=row.rpm_limit,
                      tpm_limit=row.tpm_limit, allowed_routes=_json_list(row.allowed_routes),
                      models=_json_list(row.models), metadata=json.loads(row.key_metadata))


def unknown_key(key_hash: str) -> NotFound:
    return NotFound(f"no key with token {key_hash[:12]}...; GET /key/list (or `complement "
                    "keys list`) shows the keys", param="key")


class _Window:
    """One key's last minute: request times, and (time, tokens) of settled requests."""

    __slots__ = ("hits", "tokens", "token_sum")

    def __init__(self) -> None:
        self.hits: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.token_sum = 0

    def prune(self, since: float) -> None:
        while self.hits and self.hits[0] <= since:
            self.hits.popleft()
        while self.tokens and self.tokens[0][0] <= since:
            self.token_sum -= self.tokens.popleft()[1]


Principal = Any  # ADMIN, INFERENCE or a VirtualKey


class KeyGate:
    """Who a bearer token is, and whether a virtual key may make this request now.

    Built with the config's keys; the app's lifespan gives it the :class:`KeyStore`
    (``store``) once the event store is open. Runs on the event loop (no locks)."""

    def __init__(self, admin_keys: list[str], api_keys: list[str], *,
                 cache_s: float = 1.0, window_s: float = 60.0) -> None:
        self.admin_keys = [k.encode() for k in admin_keys]
        self.api_keys = [k.encode() for k in api_keys]
        self.cache_s = cache_s
        self.window_s = window_s
        self.store: KeyStore | None = None
        self._cache: dict[str, tuple[float, VirtualKey | None]] = {}
        self._windows: dict[str, _Window] = {}
        self.served: dict[str, int] = {}
        """Requests admitted per key hash by this process (for /metrics)."""

    @property
    def auth_on(self) -> bool:
        return bool(self.admin_keys or self.api_keys)

    @property
    def virtual_on(self) -> bool:
        """Virtual keys are checked only on a server with an admin key (who issues them)."""
        return bool(self.admin_keys) and self.store is not None

    async def identify(self, token: bytes) -> Principal | None:
        """The principal ``token`` stands for, or None. The configured keys are compared in
        constant time; a virtual key is found by its SHA-256, so timing tells nothing of
        any stored key."""
        import hmac

        admin = False
        for key in self.admin_keys:
            admin |= hmac.compare_digest(token, key)
        if admin:
            return ADMIN
        inference = False
        for key in self.api_keys:
            inference |= hmac.compare_digest(token, key)
        if inference:
            return INFERENCE
        if not self.virtual_on or not token.startswith(KEY_PREFIX.encode()):
            return None
        return await self.lookup(hashlib.sha256(token).hexdigest())

    async def lookup(self, key_hash: str) -> VirtualKey | None:
        now = time.monotonic()
        cached = self._cache.get(key_hash)
        if cached is not None and now - cached[0] < self.cache_s:
            return cached[1]
        from starlette.concurrency import run_in_threadpool

        assert self.store is not None
        key = await run_in_threadpool(self.store.get, key_hash)
        if len(self._cache) > 100_000:  # a flood of made-up tokens: start over
            self._cache.clear()
        self._cache[key_hash] = (now, key)
        return key

    def forget(self, key_hash: str) -> None:
        """Drop a key's cached record (this process updated or revoked it)."""
        self._cache.pop(key_hash, None)

    def admit(self, key: VirtualKey, area: str) -> None:
        """Raise why ``key`` may not make a request of ``area`` now; else count it."""
        now = time.time()
        refusal = key.refusal(now) or _route_refusal(key, area) or key.over_budget()
        if refusal is not None:
            raise refusal
        if key.rpm_limit is None and key.tpm_limit is None:
            self.served[key.key_hash] = self.served.get(key.key_hash, 0) + 1
            return
        clock = time.monotonic()
        window = self._windows.get(key.key_hash)
        if window is None:
            window = self._windows[key.key_hash] = _Window()
        window.prune(clock - self.window_s)
        if key.rpm_limit is not None and len(window.hits) >= key.rpm_limit:
            raise _rate_limited(key, "rpm_limit", key.rpm_limit, "requests",
                                window.hits[0] + self.window_s - clock)
        if key.tpm_limit is not None and window.token_sum >= key.tpm_limit:
            wait = _tokens_wait(window, key.tpm_limit, clock, self.window_s)
            raise _rate_limited(key, "tpm_limit", key.tpm_limit, "tokens", wait)
        window.hits.append(clock)
        self.served[key.key_hash] = self.served.get(key.key_hash, 0) + 1

    def record_tokens(self, key: VirtualKey, tokens: int) -> None:
        if key.tpm_limit is None or tokens <= 0:
            return
        window = self._windows.setdefault(key.key_hash, _Window())
        window.tokens.append((time.monotonic(), tokens))
        window.token_sum += tokens

    def spent(self, key: VirtualKey, spend: float) -> None:
        """The key's spend as the database has it after this process settled a request."""
        key.spend = spend
        cached = self._cache.get(key.key_hash)
        if cached is not None and cached[1] is not None:
            cached[1].spend = spend


def _route_refusal(key: VirtualKey, area: str) -> Forbidden | None:
    if key.allowed_routes is None or area in key.allowed_routes or area == "system":
        return None
    return Forbidden(f"key {key.key_alias} may use only {key.allowed_routes}, not {area!r}; "
                     "ask the admin to add it (POST /key/update allowed_routes)",
                     code="route_not_allowed")


def _tokens_wait(window: _Window, limit: int, clock: float, window_s: float) -> float:
    """Seconds until enough tokens leave the window to go under ``limit`` again."""
    over = window.token_sum - limit + 1
    for t, n in window.tokens:
        over -= n
        if over <= 0:
            return t + window_s - clock
    return window_s


def _rate_limited(key: VirtualKey, name: str, limit: int, what: str,
                  wait_s: float) -> RateLimited:
    error = RateLimited(f"key {key.key_alias} is over its {name} of {limit} {what} per minute; "
                        f"retry after {math.ceil(max(wait_s, 0.0))} s",
                        code=f"{name}_exceeded", extra={name: limit})
    error.retry_after_s = max(1, math.ceil(wait_s))
    return error


class Charge:
    """One request's account with its virtual key: :meth:`reserve` the worst case before a
    call that costs, :meth:`settle` the real cost once (the guard settles what a route did
    not, before the answer's first byte)."""

    def __init__(self, gate: KeyGate, key: VirtualKey) -> None:
        self.gate = gate
        self.key = key
        self.reservation: str | None = None
        self.settled = False
        self.deferred = False
        """Set by a stream: the guard does not settle at the response's start."""

    def allow_route(self, route: str) -> None:
        """403 unless the key may use the route (chat's ``model``, edit's ``route``)."""
        models = self.key.models
        if models is not None and route not in models:
            raise Forbidden(f"key {self.key.key_alias} may use only the routes {models}, not "
                            f"{route!r}; ask the admin to add it (POST /key/update models)",
                            param="model", code="model_not_allowed")

    async def reserve(self, worst_case_usd: float, ttl_s: float) -> None:
        if self.key.max_budget is None or self.store is None:
            return
        from starlette.concurrency import run_in_threadpool

        store, args = self.store, (self.key.key_hash, max(worst_case_usd, 0.0),
                                   ttl_s + RESERVATION_SLACK_S)
        try:
            try:
                self.reservation = store.reserve(*args, wait=False)
            except Busy:
                self.reservation = await run_in_threadpool(store.reserve, *args)
        except BudgetExceeded as exc:
            spend = exc.extra.get("spend")
            if isinstance(spend, float):
                self.gate.spent(self.key, spend)
            raise

    async def settle(self, cost_usd: float | None, tokens: int = 0) -> None:
        """Record the request's real cost (exactly once; later calls do nothing)."""
        if self.settled:
            return
        self.settled = True
        self.gate.record_tokens(self.key, tokens)
        cost = float(cost_usd or 0.0)
        if (cost <= 0 and self.reservation is None) or self.store is None:
            return
        from starlette.concurrency import run_in_threadpool

        args = (self.key.key_hash, self.reservation, cost)
        try:
            spend = self.store.settle(*args, wait=False)
        except Busy:
            spend = await run_in_threadpool(self.store.settle, *args)
        self.gate.spent(self.key, spend)

    @property
    def store(self) -> KeyStore | None:
        return self.gate.store


def charge_of(request: Any) -> Charge | None:
    """The request's :class:`Charge` when it came with a virtual key."""
    return getattr(request.state, "complement_charge", None)
