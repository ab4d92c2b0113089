"""What a served Tab shows, per kind, and what its event store counted (issue 15).

    python benchmarks/tab_served.py ../shared/data/commits [--projects test] [--requests 3000]

Starts ``complement serve`` on ``--config`` (default: the default config, feature logging
and sampling on, as deployed) with a fresh data directory, and lets ``--users`` simulated
people replay the edits of ``--projects`` (a split name, or comma-separated NAMEs of
DATA/NAME.jsonl.gz) through ``POST /v1/tab`` and ``POST /v1/feedback``, asking also when
each hunk is done (where a jump can be accepted). Prints what the users saw per kind
(``insert``, ``rewrite``, ``jump``: shown and accepted), then what the server's store
counted (``/v1/dashboard``: per kind and chooser — the policy or a rule — and per policy
version the policy's own show and accept rates, as the loop trains on them), and a JSON
summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory of NAME.jsonl.gz edit histories")
    p.add_argument("--projects", default="test", help="a split name or comma-separated project NAMEs")
    p.add_argument("--requests", type=int, default=3000, help="Tab requests in all")
    p.add_argument("--users", type=int, default=4, help="concurrent simulated people")
    p.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    p.add_argument("--port", type=int, default=18791)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import httpx

    from specialists.tab.data import load_split
    from router.serving import ServeProcess
    from specialists.tab.loop.simulate import simulate

    pairs = load_split(args.data, args.projects)
    if not pairs:
        p.error(f"no edits for {args.projects!r} under {args.data}")
    random.Random(args.seed).shuffle(pairs)
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["COMPLEMENT_DATA_DIR"] = tmp  # the config's data_dir: a fresh event store
        server = ServeProcess(Path(args.config), args.port,
                              Path(tmp) / "server.log").start(timeout=300)
        try:
            stats = simulate(server.url, pairs, users=args.users, max_requests=args.requests)
            tab = httpx.get(f"{server.url}/v1/dashboard", timeout=30).json()["tab"]
        finally:
            server.stop()
    seen = stats.summary()
    print(f"{seen['requests']} requests by {args.users} simulated users on {args.projects} "
          f"({platform.machine()}): reward {seen['reward_per_request']:+.4f} per request, "
          f"show {seen['show_rate']:.3f}, accept {seen['accept_rate']:.3f}, errors {seen['errors']}")
    print("| kind (users saw) | shown | accepted |\n| --- | --- | --- |")
    for kind, row in seen["kinds"].items():
        print(f"| {kind} | {row['shown']} | {row['accepted']} |")
    print("| kind (store) | chosen by | shown | accepted | characters accepted |\n| --- | --- | --- | --- | --- |")
    for row in tab["kinds"]:
        print(f"| {row['kind']} | {row['by']} | {row['shown']} | {row['accepted']} | {row['chars_accepted']} |")
    for row in tab["versions"]:
        print(f"policy version {row['version']}: {row['events']} events, its own show rate "
              f"{row['show_rate']:.3f}, accept rate {row['accept_rate']:.3f}, reward "
              f"{row['reward_per_request']:+.4f} per request (what the loop trains on)")
    summary = {"projects": args.projects, "users": args.users, "seen": seen,
               "store_kinds": tab["kinds"], "store_versions": tab["versions"]}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
