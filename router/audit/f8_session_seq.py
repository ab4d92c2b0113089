"""F8: one request with a huge ``seq`` must not silence its session (nor must a restart).

Before: the newest ``seq`` a session had sent was kept for good, so one request with
``seq`` 10^18 (from anyone who knows or guesses a session id, e.g. a document's URI) had
every later request of that session answered "cancelled: a newer request from this session
arrived": Tab went silent in that file with no error. The same happened to an editor that
reloaded and counted from 0 again. Now a ``seq`` past 2^53 - 1 is a 400, and a lower
``seq`` after a pause (``session_restart_s``) starts the session again.

Each round: a victim session types (seq 0..4), the attacker sends one request for the same
session (seq 10^18, then 2^53 - 1, then a negative seq), the victim pauses and types on
(seq 5..9). A victim request answered ``cancelled`` after the pause is a failure; an
out-of-range ``seq`` that is not a 400 is a failure too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from router.audit.common import Tally, serve

FILE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    ret"
RESTART_S = 0.5
"""The Tab specialist's default ``session_restart_s``."""


def config(tmp: Path, checkpoint: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"sample": False, "processes": 0}
    if checkpoint:
        options.update(checkpoint=checkpoint, context_tokens=48)
    return {"data_dir": str(tmp / "data"),
            "specialists": {"tab": {"class": "specialists.tab:TabSpecialist",
                                    "options": options}}}


def tab(client: httpx.Client, session: str, seq: int) -> httpx.Response:
    return client.post("/v1/tab", json={"file": FILE, "cursor": len(FILE), "language": "python",
                                        "path": "calc.py", "session": session, "seq": seq})


def cancelled(r: httpx.Response) -> bool:
    return r.status_code == 200 and bool(r.json().get("cancelled"))


def probe(tmp: Path, checkpoint: str | None = None, rounds: int = 3) -> Tally:
    tally = Tally("F8 session seq")
    with serve(config(tmp, checkpoint)) as url, httpx.Client(base_url=url, timeout=60) as client:
        for i in range(rounds):
            session = f"file:///victim/{i}.py"
            for seq in range(5):
                tab(client, session, seq)
            for bad in (10**18, 2**53, -1):  # out of range: refused, and no effect
                tally.attempts += 1
                r = tab(client, session, bad)
                tally.expect(r.status_code == 400, f"seq {bad}: {r.status_code}, not a 400")
            tally.attempts += 1  # the largest seq taken, sent by someone else
            tab(client, session, 2**53 - 1)
            time.sleep(RESTART_S * 1.5)
            for seq in range(5, 10):
                r = tab(client, session, seq)
                tally.expect(r.status_code == 200 and not cancelled(r),
                             f"round {i} seq {seq} after the attack: {r.status_code} "
                             f"{r.text[:120]}")
            # an editor that reloads counts from 0 again: answered after the pause
            time.sleep(RESTART_S * 1.5)
            tally.attempts += 1
            for seq in range(3):
                r = tab(client, session, seq)
                tally.expect(not cancelled(r), f"round {i}: reload seq {seq} cancelled")
    return tally
