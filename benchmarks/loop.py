"""The online loop, measured: ten simulated turns from the shipped checkpoint.

    python benchmarks/loop.py ../shared/data/commits [--turns 10] [--events-per-turn 5000]
                              [--population configs/users/default.yaml]

Per turn: events collected, off-policy events refused, show rate, accept rate, reward per
request (of the deployed version, on the held-out projects its users replay), and the
turnaround with its parts. Then the API's absorption rate while the trainer runs: simulated
users keep sending requests and feedback during a training step, and the events logged per
second are counted; every acknowledged event must be in the store (``events_lost``).
Prints a table and a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def absorb_while_training(out: Path, args: argparse.Namespace) -> dict:
    """events/s the API takes while ``train_from_events`` runs in this process."""
    from specialists.tab.events import EventStore, sqlite_url
    from router.serving import ServeProcess
    from specialists.tab.loop.runner import LoopArgs, _free_port, _server_config
    from specialists.tab.loop.simulate import simulate
    from specialists.tab.loop.trainer import train_from_events
    from specialists.tab.loop.versions import PolicyStore
    from specialists.tab.data import load_split

    state = out / "state"
    store = PolicyStore(state / "tab")
    events = EventStore(sqlite_url(state))
    port = _free_port()
    loop_args = LoopArgs(data=args.data, out=str(out), checkpoint=args.checkpoint)
    server = ServeProcess(_server_config(loop_args, state, store, port), port,
                          state / "absorb.log").start()
    pairs = load_split(args.data, args.collect)
    try:
        deployed = store.deployed()
        have = len(events.labelled(str(deployed)))
        if have < args.absorb_events:  # the trainer needs the deployed version's events
            simulate(server.url, pairs, users=args.users, max_requests=args.absorb_events - have)
        before = events.counts()["actions"]
        result: dict = {}
        done = threading.Event()

        def trainer() -> None:
            t0 = time.monotonic()
            try:
                train_from_events(events, store)
            finally:
                result["train_s"] = time.monotonic() - t0
                done.set()

        thread = threading.Thread(target=trainer)
        t0 = time.monotonic()
        thread.start()
        stats = _until(done, server.url, pairs, args.users, simulate)
        thread.join()
        seconds = time.monotonic() - t0
        stored = events.counts()["actions"] - before
        return {"events_per_s": round(stored / seconds, 1), "absorb_seconds": round(seconds, 2),
                "train_s": round(result.get("train_s", 0.0), 2),
                "acknowledged": stats.requests, "stored": stored,
                "lost": max(0, stats.requests - stored)}
    finally:
        server.stop()
        events.close()


def _until(done: threading.Event, url: str, pairs: list, users: int, simulate: Any) -> Any:
    """Simulate until the trainer finishes (at least 3 s, so short steps are measurable)."""
    t0 = time.monotonic()
    total = None
    while not done.is_set() or time.monotonic() - t0 < 3.0:
        stats = simulate(url, pairs, users=users, max_seconds=1.0)
        if total is None:
            total = stats
        else:
            total.requests += stats.requests
            total.feedback_sent += stats.feedback_sent
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="directory of JSONL.gz edit pairs (../shared/data/commits)")
    parser.add_argument("--collect", default="test", metavar="PROJECTS",
                        help="projects the simulated users type (a split name or comma-separated "
                             "NAMEs of DATA/NAME.jsonl.gz)")
    parser.add_argument("--gate", default="dev", metavar="PROJECTS",
                        help="projects whose edits the gate replays (kept apart from --collect)")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--events-per-turn", type=int, default=5000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--checkpoint", default=None, help="LM + policy (default: shipped)")
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    parser.add_argument("--absorb-events", type=int, default=5000,
                        help="events of the deployed version the absorption step trains on")
    parser.add_argument("--population", default=None, metavar="FILE.yaml",
                        help="the simulated users are this population's people (configs/users/; "
                             "default: oracles, the figures before issue 35)")
    parser.add_argument("--reward", choices=("kept", "accept"), default="accept",
                        help="what the trainer and the gate score by: accept (the accept key, "
                             "the figures before issue 35; default) or kept (what was kept, "
                             "from the simulated editors' final reports)")
    parser.add_argument("--skip-loop", action="store_true",
                        help="reuse the turns already in --out; measure absorption only")
    args = parser.parse_args()

    from router.serving import ServeProcess
    from specialists.tab.loop.runner import LoopArgs, run_loop

    out = Path(args.out or tempfile.mkdtemp(prefix="complement-loop-"))
    loop = LoopArgs(data=args.data, turns=args.turns, events_per_turn=args.events_per_turn,
                    users=args.users, out=str(out), checkpoint=args.checkpoint,
                    collect_split=args.collect, gate_split=args.gate, population=args.population,
                    reward=args.reward)
    if not args.skip_loop:
        run_loop(loop, serve=lambda config, port, log: ServeProcess(config, port, log).start(),
                 progress=lambda m: print(m, file=sys.stderr, flush=True))
    turns = json.loads((out / "loop.json").read_text())["turns"]
    absorb = absorb_while_training(out, args)
    lost = sum(max(0, t["extra"]["acknowledged"] - t["extra"]["stored"]) for t in turns)
    print(f"{'turn':>4} {'ver':>4} {'events':>7} {'refused':>8} {'show':>6} {'accept':>7} "
          f"{'reward':>8} {'held-out':>9} {'collect':>8} {'train':>6} {'gate':>6} {'total':>7} "
          f"shipped")
    for t in turns:
        print(f"{t['turn']:>4} {t['deployed']:>4} {t['events']:>7} {t['off_policy_refused']:>8} "
              f"{t['show_rate']:>6.3f} {t['accept_rate']:>7.3f} {t['reward_per_request']:>+8.4f} "
              f"{t['extra']['gate_reward_deployed']:>+9.4f} "
              f"{t['collect_s']:>7.1f}s {t['train_s']:>5.1f}s {t['gate_swap_s']:>5.1f}s "
              f"{t['turnaround_s']:>6.1f}s {t['shipped']}")
    print(f"absorbed {absorb['events_per_s']} events/s while training "
          f"({absorb['stored']} events in {absorb['absorb_seconds']}s)")
    keys = ("events", "off_policy_refused", "show_rate", "accept_rate", "reward_per_request",
            "turnaround_s", "collect_s", "train_s", "gate_swap_s", "shipped", "deployed")
    extra = ("gate_reward_deployed", "gate_reward_candidate")
    summary = {
        "turns": [{**{k: t[k] for k in keys}, **{k: t["extra"].get(k) for k in extra}}
                  for t in turns],
        "median_turnaround_s": round(statistics.median(t["turnaround_s"] for t in turns), 2),
        "events_per_s": absorb["events_per_s"],
        "events_lost": lost + absorb["lost"],
        "plot": str(out / "loop.png"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
    }
    if args.population:
        summary["population"] = args.population
        summary["collect_kept"] = [{k: t["extra"].get(k) for k in (
            "collect_accept_rate", "collect_kept_reward_per_request", "collect_chars_kept",
            "collect_chars_kept_per_1000",
            "switched_off", "tab_off")} for t in turns]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
