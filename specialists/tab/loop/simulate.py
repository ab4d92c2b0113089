"""Simulated users driving the real HTTP API, exactly as an editor would.

Each user replays held-out real edits (the Tab specialist's ``Session``): at every trigger
it sends ``POST /v1/tab``, lets the simulated person judge the suggestion, and reports the
outcome with ``POST /v1/feedback`` (batched, as buffering clients do), and in a later batch
the final report on an accept: the characters still there ``KeptReward.window`` keystrokes
later, or its undo (issue 35). Users run
concurrently in threads; the loop bounds them by request count and wall time.

With a ``world`` (:class:`specialists.tab.users.World`, issue 35) user ``j`` is that world's
person ``j``, who acts on the judgement with their traits; while their Tab is switched off
the editor sends nothing (the request is not made). Without one, the person is the oracle.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["SimStats", "simulate"]


@dataclass
class SimStats:
    requests: int = 0
    shown: int = 0
    accepted: int = 0
    reward: float = 0.0
    chars_saved: int = 0
    chars_kept: int = 0
    """Accepted characters still there after the kept window (``users.KeptReward``)."""
    reward_kept: float = 0.0
    keystrokes: int = 0
    """Characters the replayed edits needed, typed or accepted (up to where each stopped)."""
    switched_off: int = 0
    tab_off: int = 0
    """Requests not made: the person's Tab was switched off."""
    feedback_sent: int = 0
    finals_sent: int = 0
    """Final reports acknowledged: what was kept, undone or switched off (issue 35)."""
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    versions: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, list[int]] = field(default_factory=dict)
    """Per kind shown (``insert``, ``rewrite``, ``jump``): [shown, accepted]."""

    def summary(self) -> dict[str, Any]:
        n = max(1, self.requests)
        return {"requests": self.requests, "show_rate": round(self.shown / n, 4),
                "accept_rate": round(self.accepted / max(1, self.shown), 4),
                "reward_per_request": round(self.reward / n, 4),
                "chars_saved": self.chars_saved, "chars_kept": self.chars_kept,
                "chars_kept_per_1000": round(1000 * self.chars_kept / max(1, self.keystrokes), 2),
                "kept_reward_per_request": round(self.reward_kept / n, 4),
                "switched_off": self.switched_off, "tab_off": self.tab_off,
                "seconds": round(self.seconds, 2),
                "requests_per_s": round(self.requests / max(self.seconds, 1e-9), 1),
                "errors": len(self.errors), "versions": dict(self.versions),
                "kinds": {k: {"shown": v[0], "accepted": v[1]} for k, v in sorted(self.kinds.items())}}


class _User:
    def __init__(self, client: Any, stats: SimStats, lock: threading.Lock, batch: int,
                 reward: Any, person: Any = None) -> None:
        from specialists.tab.users import KeptReward

        self.person = person
        self.kept = KeptReward()
        self.client = client
        self.stats = stats
        self.lock = lock
        self.batch = batch
        self.reward = reward
        self.pending: list[dict[str, Any]] = []
        self.finals: list[dict[str, Any]] = []
        """Final reports of the outcomes in ``pending``: sent with the next batch, as an
        editor sends one some keystrokes after the accept."""
        self.due: list[dict[str, Any]] = []

    def flush(self) -> None:
        """Send the outcomes waiting and the final reports of the previous batch's."""
        outcomes, finals = self.pending, self.due
        self.pending, self.due, self.finals = [], self.finals, []
        if not outcomes and not finals:
            return
        r = self.client.post("/v1/feedback", json={"feedback": outcomes + finals})
        if r.status_code != 200:
            with self.lock:
                self.stats.errors.append(f"feedback {r.status_code}: {r.text[:200]}")
            return
        results = r.json()["results"]
        bad = [x for x in results if x["status"] == "error"]
        with self.lock:
            self.stats.feedback_sent += sum(x["status"] != "error" for x in results[:len(outcomes)])
            self.stats.finals_sent += sum(x["status"] != "error" for x in results[len(outcomes):])
            self.stats.errors += [f"feedback item: {x['error']['message']}" for x in bad]

    def report(self, request_id: str, out: Any) -> None:
        """Queue the outcome, and what was kept: an accept's final report follows in a
        later batch (accepted characters still there ``window`` keystrokes later, or an
        undo within them); a switch-off of Tab comes with the dismissal it followed."""
        if not out.accepted:
            item: dict[str, Any] = {"request_id": request_id, "outcome": "rejected"}
            if out.switched_off:
                item["switched_off"] = True
            self.pending.append(item)
            return
        wrong = out.undone_after is not None  # taken whole, then undone
        self.pending.append({"request_id": request_id, "outcome": "accepted",
                             "chars_accepted": out.chars_kept if wrong else out.chars_saved})
        final: dict[str, Any] = {"request_id": request_id, "outcome": "accepted"}
        if wrong and out.undone_after <= self.kept.window:
            final["undone"] = True
        else:
            final.update(chars_kept=self.kept.kept(out), kept_after=self.kept.window)
        if out.switched_off:
            final["switched_off"] = True
        self.finals.append(final)

    def replay(self, pair: Any, budget: "_Budget") -> None:
        from specialists.tab.replay import Session, Suggestion

        # asks also when each hunk is done, as an editor does: where a jump can be accepted
        session = Session(pair, reward=self.reward, ask_after_edit=True, person=self.person)
        seq = 0
        while (req := session.next_request()) is not None:
            if session.tab_off:
                session.respond(None)  # Tab is off: the editor asks nothing (the person counts down)
                with self.lock:
                    self.stats.tab_off += 1
                continue
            if not budget.take():
                break  # the session is dropped with its request unanswered
            seq += 1
            body = req.to_json()
            body.pop("request_id", None)  # the server issues unique ids
            r = self.client.post("/v1/tab", json=body)
            if r.status_code != 200:
                session.respond(None)
                with self.lock:
                    self.stats.errors.append(f"tab {r.status_code}: {r.text[:200]}")
                continue
            answer = r.json()
            sug = Suggestion.from_output(answer.get("suggestion"))
            out = session.respond(sug)
            with self.lock:
                s = self.stats
                s.requests += 1
                s.shown += out.shown
                s.accepted += out.accepted
                s.reward += out.reward
                s.chars_saved += out.chars_saved
                s.chars_kept += self.kept.kept(out)
                s.reward_kept += self.kept.score(out)
                s.switched_off += out.switched_off
                if out.shown and sug is not None:
                    counts = s.kinds.setdefault(sug.kind, [0, 0])
                    counts[0] += 1
                    counts[1] += out.accepted
                v = str(answer.get("policy_version"))
                s.versions[v] = s.versions.get(v, 0) + 1
            if out.shown:
                self.report(answer["request_id"], out)
                if len(self.pending) >= self.batch:
                    self.flush()
        self.flush()
        self.flush()  # the last batch's final reports
        with self.lock:  # the characters the edit needed so far, typed or accepted
            self.stats.keystrokes += session.typed_chars + session.saved_chars


class _Budget:
    def __init__(self, requests: int | None, deadline: float | None) -> None:
        self.left = requests
        self.deadline = deadline
        self.lock = threading.Lock()

    def take(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            return False
        with self.lock:
            if self.left is None:
                return True
            if self.left <= 0:
                return False
            self.left -= 1
            return True


def simulate(base_url: str, pairs: Iterable[Any], *, users: int = 8,
             max_requests: int | None = None, max_seconds: float | None = None,
             api_key: str | None = None, feedback_batch: int = 16,
             reward: Any = None, world: Any = None) -> SimStats:
    """Replay ``pairs`` through the API with ``users`` concurrent simulated people (the
    ``world``'s first ``users`` people, or oracles)."""
    import httpx

    stats = SimStats()
    lock = threading.Lock()
    queue = list(pairs)
    queue_lock = threading.Lock()
    t0 = time.monotonic()
    budget = _Budget(max_requests, t0 + max_seconds if max_seconds else None)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def worker(j: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60, headers=headers) as client:
            person = world.person(j) if world is not None else None
            user = _User(client, stats, lock, feedback_batch, reward, person)
            while True:
                with queue_lock:
                    if not queue:
                        return
                    pair = queue.pop(0)
                try:
                    user.replay(pair, budget)
                except httpx.HTTPError as exc:
                    with lock:
                        stats.errors.append(f"http: {exc}")
                    return
                if budget.left is not None and budget.left <= 0:
                    return

    threads = [threading.Thread(target=worker, args=(j,), daemon=True) for j in range(max(1, users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats.seconds = time.monotonic() - t0
    return stats
