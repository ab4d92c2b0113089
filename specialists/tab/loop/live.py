"""The live loop: learn from the users of a running server, and swap the result into it.

``complement loop`` (without ``--simulate``) runs this beside ``complement serve``: it reads
the server's event store and policy store (the same data directory), and once the deployed
version has enough labelled events — decisions with the user's accept or reject, or with
nothing shown — it runs one turn:

1. train the deployed version on its own events, less a held-out share (on-policy: events
   of any other version are refused);
2. gate the candidate on the held-out events (``LoggedGate``, off-policy evaluation);
3. if it passes, ask the server to hot-swap it (``deploy``: ``POST /v1/tab/deploy``), which
   moves the deployed pointer; the next turn waits for the new version's own events.

Every turn is recorded in the event store's deploy log (``gate_passed`` / ``gate_failed``
with both rewards) and in ``<data_dir>/tab/live.json``, which ``complement loop status``
reads.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from specialists.base import SpecialistError
from specialists.tab.events import EventStore
from specialists.tab.loop.versions import PolicyStore

__all__ = ["LiveArgs", "LiveTurn", "live_log", "run_live"]


@dataclass
class LiveArgs:
    min_events: int = 200
    """Labelled events of the deployed version a turn needs before it trains."""
    holdout: float = 0.2
    """Share of those events kept out of training, for the gate."""
    gate_margin: float = 0.005
    """Largest drop in estimated reward per request the gate lets through."""
    turns: int = 0
    """Turns to run; 0 keeps watching until interrupted."""
    interval_s: float = 10.0
    """How often to look at the event store while waiting for events."""
    wait_s: float | None = None
    """Give up waiting for events after this long (``None``: wait as long as it takes)."""


@dataclass
class LiveTurn:
    parent: int
    candidate: int | None = None
    events: int = 0
    held_out: int = 0
    off_policy_refused: int = 0
    reward_deployed: float = 0.0
    reward_candidate: float = 0.0
    shipped: bool = False
    gate: str = ""
    seconds: float = 0.0
    at: float = field(default_factory=time.time)


def live_log(store: PolicyStore) -> Path:
    return store.root / "live.json"


def run_live(args: LiveArgs, events: EventStore, store: PolicyStore,
             deploy: Callable[[int], Any], progress: Callable[[str], None] = print
             ) -> list[LiveTurn]:
    """Run turns (see the module docstring); ``deploy(version)`` swaps one into the server."""
    done: list[LiveTurn] = []
    while args.turns == 0 or len(done) < args.turns:
        deployed = store.deployed()
        if deployed is None:
            raise SpecialistError(f"no deployed policy under {store.root}: start the server "
                                  "(`complement serve`) once, it publishes its policy there")
        if not _wait_for_events(args, events, deployed, progress):
            break
        turn = _turn(args, events, store, deployed, deploy)
        done.append(turn)
        _append(live_log(store), turn)
        progress(f"loop: version {deployed} → {turn.candidate}: {turn.gate}"
                 + (f"; serving {turn.candidate}" if turn.shipped else ""))
    return done


def _wait_for_events(args: LiveArgs, events: EventStore, version: int,
                     progress: Callable[[str], None]) -> bool:
    started = time.monotonic()
    last = -1
    while True:
        events.expire_stale()  # a shown suggestion nobody answered counts as rejected
        # counted in SQL (version_stats), not by loading every event's features
        have = next((row["events"] for row in events.version_stats()
                     if row["version"] == str(version)), 0)
        if have >= args.min_events:
            return True
        if have != last:
            progress(f"loop: version {version} has {have}/{args.min_events} labelled events; "
                     "waiting for more")
            last = have
        if args.wait_s is not None and time.monotonic() - started >= args.wait_s:
            progress(f"loop: gave up after {args.wait_s:g}s with {have} events")
            return False
        time.sleep(args.interval_s)


def _turn(args: LiveArgs, events: EventStore, store: PolicyStore, deployed: int,
          deploy: Callable[[int], Any]) -> LiveTurn:
    from specialists.tab.loop.gate import LoggedGate
    from specialists.tab.loop.trainer import split_events, train_from_events

    t0 = time.monotonic()
    turn = LiveTurn(parent=deployed)
    labelled = events.labelled(str(deployed))  # read once: the trainer and the gate split it
    report = train_from_events(events, store, min_events=1, holdout=args.holdout,
                               labelled=labelled)
    _, held = split_events(labelled, args.holdout)
    result = LoggedGate(margin=args.gate_margin).check(store.path(report.version),
                                                       report.version, deployed, held)
    turn.candidate, turn.events, turn.held_out = report.version, report.events_used, len(held)
    turn.off_policy_refused = report.off_policy_refused
    turn.reward_deployed = round(result.reward_deployed, 4)
    turn.reward_candidate = round(result.reward_candidate, 4)
    turn.gate = result.reason
    events.record_deploy(str(report.version), "gate_passed" if result.passed else "gate_failed",
                         reason=result.reason, parent=deployed,
                         reward_candidate=turn.reward_candidate,
                         reward_deployed=turn.reward_deployed, **result.summary())
    if result.passed:
        deploy(report.version)
        turn.shipped = True
    turn.seconds = round(time.monotonic() - t0, 3)
    return turn


def _append(path: Path, turn: LiveTurn) -> None:
    turns = read_turns(path)
    turns.append(asdict(turn))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"turns": turns[-200:]}, indent=1))
    os.replace(tmp, path)


def read_turns(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text())["turns"])
    except (FileNotFoundError, ValueError, KeyError):
        return []
