"""Latency of the served Tab specialist alone: one request at a time, warm, on this CPU.

    python benchmarks/tab_latency.py ../shared/data/commits [--requests 500]

Requests are the held-out test projects' replayed trigger points (the same states
``benchmarks/tab.py`` scores); each goes through ``TabSpecialist.answer`` exactly as
``POST /v1/tab`` calls it (windowing, context copy, LM scoring, the policy), without the
HTTP hop and without any feature cache. Prints p50/p95/p99 and a JSON summary last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def requests_from(data: str, n: int, seed: int, projects: str = "test") -> list[dict]:
    from specialists.tab.data import load_split
    from specialists.tab.replay import Session

    pairs = load_split(data, projects, limit_per_project=60, seed=seed)
    out = []
    for pair in pairs:
        session = Session(pair)
        while (req := session.next_request()) is not None:
            out.append(req.to_json())
            session.respond(None)
    random.Random(seed).shuffle(out)
    return out[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="directory of JSONL.gz edit pairs (../shared/data/commits)")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--projects", default="test", metavar="PROJECTS",
                        help="a split name or comma-separated NAMEs of DATA/NAME.jsonl.gz")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from specialists.tab import TabSpecialist

    spec = TabSpecialist()
    spec.setup()
    reqs = requests_from(args.data, args.requests, args.seed, args.projects)
    for body in reqs[:20]:  # warm-up
        spec.answer(body)
    times = []
    for body in reqs:
        t0 = time.perf_counter()
        spec.answer(body)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()

    def pct(q: float) -> float:
        return round(times[min(len(times) - 1, int(q * len(times)))], 2)

    summary = {"requests": len(times), "p50_ms": pct(0.5), "p95_ms": pct(0.95),
               "p99_ms": pct(0.99), "max_ms": round(times[-1], 2),
               "load_average": os.getloadavg(),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU"}
    print(f"Tab specialist, {len(times)} held-out requests: p50 {summary['p50_ms']} ms, "
          f"p95 {summary['p95_ms']} ms, p99 {summary['p99_ms']} ms")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
