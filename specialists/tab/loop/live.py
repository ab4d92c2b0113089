"""The live loop: learn from the users of a running server, and swap the result into it.

``complement loop`` (without ``--simulate``) runs this beside ``complement serve``: it reads
the server's event store and policy store (the same data directory), and once the deployed
version has enough labelled events — decisions with the user's accept or reject, or with
nothing shown — it runs one turn:

1. train the deployed version on its own events, less a held-out share (on-policy: events
   of any other version are refused);
2. gate the candidate on the held-out events (``LoggedGate``, off-policy evaluation);
3. if it passes, ask the server to hot-swap it (``deploy``: ``POST /v1/tab/deploy``), which
   moves the deployed pointer; the next turn waits for the new version's own events;
4. or, with ``canary_share`` > 0 (issue 15), serve it to that share of the editors first
   (``POST /v1/tab/canary``), wait until both arms have ``canary_min_events`` labelled
   events since the canary started, and compare their live reward per request (unpaired,
   95% interval: :func:`~specialists.tab.loop.gate.judge_canary`): roll it back when the
   interval ends below ``-canary_margin`` (shown worse), else promote it to everyone.

Events are scored by the reward ``LiveArgs.reward`` names (the config's ``loop.reward``):
``kept`` — what the editors' final reports say was kept, undone or switched off (issue 35)
— or ``accept``, the accept key; the trainer, the gate and the canary all use it, and each
turn reports the characters kept per request beside the reward.

Every turn is recorded in the event store's deploy log (``gate_passed`` / ``gate_failed``
with both rewards, ``canary_passed`` / ``canary_failed`` with both arms' figures; the
server adds ``canary_start``, ``canary_promoted``, ``canary_aborted``) and in
``<data_dir>/tab/live.json``, which ``complement loop status`` reads. A loop stopped while
its canary runs judges that canary when it starts again.
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

__all__ = ["LiveArgs", "LiveTurn", "PRESETS", "chars_kept", "live_log", "run_live"]


PRESETS: dict[str, dict[str, Any]] = {
    "default": {"min_events": 200, "canary_share": 0.1, "canary_min_events": 200},
    "small-team": {"min_events": 60, "canary_share": 0.5, "canary_min_events": 30},
}
"""The live loop's traffic thresholds by team size (``complement loop --preset``). The
default needs about 2,000 Tab requests before a canary decision (200 labelled events an arm
at a 10% share); ``small-team`` turns after 60 labelled events and judges a canary served
to half the editors on 30 an arm, so a few people see the loop act within an afternoon.
Its canary interval is wider: it rolls back only a clearly worse candidate, and the gate
before it, on held-out events, still holds back one that is worse there."""


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
    canary_share: float = 0.1
    """Share of editors served a candidate that passed the gate before it is promoted or
    rolled back on their measured reward (0: deploy it to everyone at once)."""
    canary_min_events: int = 200
    """Labelled events each arm (canary, deployed) needs in the canary's window."""
    canary_margin: float = 0.005
    """A canary whose live reward per request is shown lower than the deployed version's by
    more than this (the 95% interval of canary − deployed ends below ``-canary_margin``)
    is rolled back; any other is promoted."""
    reward: str = "kept"
    """What the trainer, the gate and the canary score events by (config ``loop.reward``):
    ``kept`` (what the editors' final reports say was kept) or ``accept`` (the accept key)."""


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
    canary: dict[str, Any] = field(default_factory=dict)
    """The canary's figures and ``decision`` (promoted, rolled_back, waiting, ended)."""
    reward: str = "kept"
    """The reward both rewards above are (``LiveArgs.reward``)."""
    chars_kept_per_request: float = 0.0
    """The deployed version's characters kept per request on the events trained on, beside
    its reward: a policy that wins reward by showing less keeps fewer (the server sees
    requests, not keystrokes; the simulated loop reports per 1,000 keystrokes)."""


def live_log(store: PolicyStore) -> Path:
    return store.root / "live.json"


Canary = Callable[[str, dict[str, Any]], Any]
"""``canary(action, body)``: ``start`` ({version, share}), ``promote`` or ``abort`` the
server's canary (``POST /v1/tab/canary[/promote|/abort]``)."""


def run_live(args: LiveArgs, events: EventStore, store: PolicyStore,
             deploy: Callable[[int], Any], progress: Callable[[str], None] = print,
             canary: Canary | None = None) -> list[LiveTurn]:
    """Run turns (see the module docstring); ``deploy(version)`` swaps one into the server,
    ``canary`` runs its canary (needed when ``args.canary_share`` > 0)."""
    if not 0.0 <= args.canary_share < 1.0:
        raise SpecialistError(f"--canary-share is a share of editors, 0 (no canary) to "
                              f"below 1; got {args.canary_share}")
    if args.canary_share > 0 and canary is None:
        raise SpecialistError("a canary share needs a server to run the canary on")
    done: list[LiveTurn] = []
    while args.turns == 0 or len(done) < args.turns:
        deployed = store.deployed()
        if deployed is None:
            raise SpecialistError(f"no deployed policy under {store.root}: start the server "
                                  "(`complement serve`) once, it publishes its policy there")
        running = store.canary()
        if running is not None and running["version"] != deployed and canary is not None:
            # started by an earlier turn or run: judged before anything is trained again
            turn = LiveTurn(parent=deployed, candidate=running["version"], gate="(earlier)",
                            canary={"decision": "running"})
        else:
            if not _wait_for_events(args, events, deployed, progress):
                break
            turn = _turn(args, events, store, deployed, deploy, canary)
        finished = True
        if turn.canary and canary is not None:
            finished = _judge_canary(args, events, store, turn, canary, progress)
        turn.seconds = round(time.time() - turn.at, 3)
        done.append(turn)
        _append(live_log(store), turn)
        progress(f"loop: version {deployed} → {turn.candidate} ({turn.reward} reward; "
                 f"{turn.chars_kept_per_request:g} characters kept a request): {turn.gate}"
                 + (f"; canary {turn.canary['decision']}: {turn.canary.get('reason', '')}"
                    if turn.canary else "")
                 + (f"; serving {turn.candidate}" if turn.shipped else ""))
        if not finished:
            break
    return done


def _labelled_counts(events: EventStore, versions: list[int], since: float | None = None
                     ) -> tuple[int, ...]:
    """Each version's labelled events (``since``: decided from then on), after counting every
    shown suggestion nobody answered in time as rejected; counted in SQL
    (``version_stats``), not by loading every event's features."""
    events.expire_stale()
    counts = {row["version"]: row["events"] for row in events.version_stats(since=since)}
    return tuple(counts.get(str(v), 0) for v in versions)


def _wait_for_events(args: LiveArgs, events: EventStore, version: int,
                     progress: Callable[[str], None]) -> bool:
    started = time.monotonic()
    last = -1
    while True:
        (have,) = _labelled_counts(events, [version])
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
          deploy: Callable[[int], Any], canary: Canary | None) -> LiveTurn:
    from specialists.tab.loop.gate import LoggedGate
    from specialists.tab.loop.trainer import named_reward, split_events, train_from_events

    turn = LiveTurn(parent=deployed, reward=args.reward)
    reward = named_reward(args.reward)
    labelled = events.labelled(str(deployed))  # read once: the trainer and the gate split it
    report = train_from_events(events, store, min_events=1, holdout=args.holdout,
                               labelled=labelled, reward=reward)
    _, held = split_events(labelled, args.holdout)
    result = LoggedGate(margin=args.gate_margin).check(store.path(report.version),
                                                       report.version, deployed, held,
                                                       reward=reward)
    turn.chars_kept_per_request = round(chars_kept(labelled) / max(1, len(labelled)), 3)
    turn.candidate, turn.events, turn.held_out = report.version, report.events_used, len(held)
    turn.off_policy_refused = report.off_policy_refused
    turn.reward_deployed = round(result.reward_deployed, 4)
    turn.reward_candidate = round(result.reward_candidate, 4)
    turn.gate = result.reason
    events.record_deploy(str(report.version), "gate_passed" if result.passed else "gate_failed",
                         reason=result.reason, parent=deployed,
                         reward_candidate=turn.reward_candidate,
                         reward_deployed=turn.reward_deployed, **result.summary())
    if result.passed and args.canary_share > 0 and canary is not None:
        answer = canary("start", {"version": report.version, "share": args.canary_share})
        turn.canary = {"share": args.canary_share, "decision": "running",
                       "started_at": answer["canary"]["started_at"]}
    elif result.passed:
        deploy(report.version)
        turn.shipped = True
    return turn


def _judge_canary(args: LiveArgs, events: EventStore, store: PolicyStore, turn: LiveTurn,
                  canary: Canary, progress: Callable[[str], None]) -> bool:
    """Wait for both arms' events, then promote or roll back the store's canary; False if
    the wait gave up (the canary keeps running; the next run judges it)."""
    from specialists.tab.loop.gate import judge_canary
    from specialists.tab.loop.trainer import named_reward

    running, deployed = store.canary(), store.deployed()
    if running is None or deployed is None or running["version"] != turn.candidate:
        turn.canary.update(decision="ended", reason="the canary was ended outside the loop")
        return True
    turn.canary.update(share=running["share"], started_at=running["started_at"])
    state = _wait_for_arms(args, events, store, running, deployed, progress)
    if state != "ready":
        turn.canary.update(decision=state, reason=("the canary was ended outside the loop"
                                                   if state == "ended" else "still collecting"))
        return state == "ended"
    since = running["started_at"]
    arm_new, arm_old = (events.labelled(str(running["version"]), since),
                        events.labelled(str(deployed), since))
    result = judge_canary(arm_new, arm_old, running["version"], deployed,
                          margin=args.canary_margin, min_events=args.canary_min_events,
                          reward=named_reward(args.reward))
    figures = {"reward": args.reward, "reward_candidate": round(result.reward_candidate, 4),
               "reward_deployed": round(result.reward_deployed, 4),
               "chars_kept_per_request_candidate":
                   round(chars_kept(arm_new) / max(1, len(arm_new)), 3),
               "chars_kept_per_request_deployed":
                   round(chars_kept(arm_old) / max(1, len(arm_old)), 3),
               "events_candidate": result.units, "events_deployed": result.requests - result.units,
               **result.summary()}
    events.record_deploy(str(running["version"]), "canary_passed" if result.passed
                         else "canary_failed", reason=result.reason, parent=deployed,
                         share=running["share"], started_at=since, **figures)
    canary("promote" if result.passed else "abort", {})
    turn.shipped = result.passed
    turn.canary.update(figures, reason=result.reason,
                       decision="promoted" if result.passed else "rolled_back")
    return True


def _wait_for_arms(args: LiveArgs, events: EventStore, store: PolicyStore,
                   running: dict[str, Any], deployed: int, progress: Callable[[str], None]
                   ) -> str:
    """``ready`` once both arms have their events since the canary started; ``ended`` if
    the canary stopped meanwhile (promoted, aborted or replaced by hand); ``waiting`` when
    ``wait_s`` ran out."""
    started = time.monotonic()
    last: tuple[int, ...] | None = None
    while True:
        if store.canary() != running or store.deployed() != deployed:
            return "ended"
        have = _labelled_counts(events, [running["version"], deployed], since=running["started_at"])
        if min(have) >= args.canary_min_events:
            return "ready"
        if have != last:
            progress(f"loop: canary {running['version']} has {have[0]}, deployed {deployed} "
                     f"{have[1]} of {args.canary_min_events} labelled events each; waiting")
            last = have
        if args.wait_s is not None and time.monotonic() - started >= args.wait_s:
            progress(f"loop: gave up after {args.wait_s:g}s; canary {running['version']} keeps "
                     "running, the next `complement loop` judges it")
            return "waiting"
        time.sleep(args.interval_s)


def chars_kept(labelled: list[Any]) -> int:
    """Characters the policy's own shows kept over ``labelled`` events: the final report's
    count, else those accepted; none of an undone accept."""
    total = 0
    for e in labelled:
        if e.credited and e.outcome in ("accepted", "partial") and not e.undone:
            total += e.chars_accepted if e.chars_kept is None else e.chars_kept
    return total


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
