"""The canary (issue 15), measured: a real ``complement serve`` with simulated users, and
``complement loop`` promoting or rolling back the canary on the reward it measured live.

    python benchmarks/canary.py ../shared/data/commits [--share 0.5] [--min-events 1000]

Two scenarios, each a canary at ``--share`` of the traffic while simulated users replay the
dev project's edits (attrs; never the held-out test projects) and ``complement loop`` waits
for both arms' labelled events, then decides:

- ``worse``: the shipped policy deployed; the canary is the same policy with its "show
  nothing" logit pinned (it never shows: reward 0 per request). Expected: rolled back.
- ``better``: that never-show version deployed; the canary is the shipped policy.
  Expected: promoted.
- ``loop``: the shipped policy deployed again; one whole turn of ``complement loop`` with
  its defaults but ``--min-events``: train on the deployed version's events, gate the
  candidate off-policy, serve it as a canary to ``--loop-share`` of the editors (default
  0.1, the CLI's), then promote or roll back. Whatever it decides is reported.

Also prints what the per-request arm pick costs (``in_canary``). Prints a table and a JSON
summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def never_show(store: Any, source: int, version: int, tmp: Path) -> int:
    """Publish ``source`` with its "show nothing" logit pinned high as ``version``."""
    import torch

    from specialists.tab.policy import TabPolicy

    policy = TabPolicy.load(store.path(source))
    with torch.no_grad():
        policy.net.none.bias.fill_(50.0)
    policy.version = version
    policy.save(tmp / f"v{version}")
    store.publish(tmp / f"v{version}", version, {"parent": source, "source": "never-show"})
    return version


def loop_with_traffic(url: str, config: Path, state: Path, pairs: list[Any],
                      args: argparse.Namespace, seed: int, *extra: str) -> dict[str, Any]:
    """Run ``complement loop --turns 1`` (it judges a running canary, or trains, gates and
    starts one) while simulated users type, in chunks, until it has decided."""
    from specialists.tab.loop.simulate import simulate

    cmd = [sys.executable, "-m", "router.cli", "loop", "--config", str(config), "--server", url,
           "--data-dir", str(state), "--turns", "1", "--canary-min-events", str(args.min_events),
           "--interval", "1", "--wait", str(args.wait), *extra]
    t0 = time.monotonic()
    loop = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    rng = random.Random(seed)
    requests = errors = 0
    while loop.poll() is None:
        stats = simulate(url, rng.sample(pairs, len(pairs)), users=args.users,
                         max_requests=args.chunk)
        requests, errors = requests + stats.requests, errors + len(stats.errors)
    out, err = loop.communicate()
    if loop.returncode != 0:
        raise RuntimeError(f"complement loop failed ({loop.returncode}): {err[-2000:]}")
    turn = json.loads(out)["turns"][0]
    return {"candidate": turn["candidate"], "deployed": turn["parent"], "gate": turn["gate"],
            "decision": "held back by the gate", **turn["canary"],
            "requests_sent": requests, "errors": errors,
            "seconds": round(time.monotonic() - t0, 1)}


def report(row: dict[str, Any], store: Any) -> None:
    row["served_after"] = store.deployed()
    line = f"{row['scenario']:7s} canary v{row['candidate']} vs v{row['deployed']}: {row['decision']}"
    if "ci" in row:
        line += (f"; reward {row['reward_candidate']:+.4f} vs {row['reward_deployed']:+.4f}, "
                 f"difference {row['difference']:+.4f} (95% CI {row['ci'][0]:+.4f} to "
                 f"{row['ci'][1]:+.4f}); events {row['events_candidate']} vs "
                 f"{row['events_deployed']}")
    if row["gate"] != "(earlier)":
        line += f"; gate: {row['gate']}"
    print(line + f"; {row['requests_sent']} requests, {row['seconds']}s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="directory of JSONL.gz edit histories")
    ap.add_argument("--share", type=float, default=0.5, help="canary share of the traffic")
    ap.add_argument("--min-events", type=int, default=1000,
                    help="labelled events each arm needs before the decision")
    ap.add_argument("--users", type=int, default=4, help="concurrent simulated users")
    ap.add_argument("--chunk", type=int, default=300, help="requests between looks")
    ap.add_argument("--wait", type=float, default=1800, help="the loop's --wait")
    ap.add_argument("--out", default=None, help="state directory (default: a temporary one)")
    ap.add_argument("--loop-share", type=float, default=0.1,
                    help="the loop scenario's --canary-share")
    ap.add_argument("--loop-min-events", type=int, default=300,
                    help="the loop scenario's --canary-min-events")
    ap.add_argument("--loop-gate-margin", default=None,
                    help="the loop scenario's --gate-margin (default: the CLI's)")
    ap.add_argument("--train-events", type=int, default=2000,
                    help="the loop scenario's --min-events (labelled events to train on)")
    args = ap.parse_args()

    import httpx

    from specialists.tab.data import load_split
    from specialists.tab.events import EventStore, sqlite_url
    from router.serving import ServeProcess
    from specialists.tab.loop.runner import LoopArgs, _bootstrap, _free_port, _server_config
    from specialists.tab.loop.versions import PolicyStore
    from specialists.tab.specialist import DEFAULT_CHECKPOINT, in_canary

    pick_us = min(timeit.repeat(lambda: in_canary("editor-1234/src/app.py", 17, 0.1),
                                number=20_000, repeat=5)) / 20_000 * 1e6
    state = Path(args.out or tempfile.mkdtemp(prefix="canary-bench-"))
    state.mkdir(parents=True, exist_ok=True)
    store = PolicyStore(state / "tab")
    shipped = _bootstrap(store, DEFAULT_CHECKPOINT)
    never = never_show(store, shipped, max(store.versions()) + 1, state)
    port = _free_port()
    config = _server_config(LoopArgs(data=args.data, out=str(state)), state, store, port)
    pairs = load_split(args.data, "dev")
    server = ServeProcess(config, port, state / "server.log").start(timeout=300)
    rows = []
    try:
        for seed, (name, control, candidate) in enumerate((("worse", shipped, never),
                                                           ("better", never, shipped))):
            if store.deployed() != control:
                httpx.post(f"{server.url}/v1/tab/deploy", json={"version": control},
                           timeout=120).raise_for_status()
            httpx.post(f"{server.url}/v1/tab/canary",
                       json={"version": candidate, "share": args.share},
                       timeout=120).raise_for_status()
            rows.append({"scenario": name, **loop_with_traffic(server.url, config, state, pairs,
                                                               args, seed)})
            report(rows[-1], store)
        httpx.post(f"{server.url}/v1/tab/deploy", json={"version": shipped},
                   timeout=120).raise_for_status()
        rows.append({"scenario": "loop", **loop_with_traffic(
            server.url, config, state, pairs, args, 2, "--min-events", str(args.train_events),
            "--canary-share", str(args.loop_share),
            "--canary-min-events", str(args.loop_min_events),
            *(["--gate-margin", args.loop_gate_margin] if args.loop_gate_margin else []))})
        report(rows[-1], store)
    finally:
        server.stop()
    events = EventStore(sqlite_url(state))
    log = [{k: d[k] for k in ("version", "event")} for d in reversed(events.deploy_log(20))]
    events.close()
    print(json.dumps({"machine": f"{platform.machine()}, {platform.python_version()}",
                      "share": args.share, "min_events": args.min_events, "users": args.users,
                      "pick_us": round(pick_us, 2), "scenarios": rows, "deploy_log": log,
                      "state": str(state)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
