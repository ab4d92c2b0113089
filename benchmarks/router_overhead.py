"""How much latency the router adds per request over calling the provider directly.

Three processes on loopback: the fake OpenAI-compatible frontier (tests/fakes), the router
(`complement serve`, one route pointed at the fake), and this client. Each round sends the
same requests directly to the fake and through the router, alternating, so both see the same
machine load; overhead = routed − direct, per percentile, at concurrency 1 and 32.

    python benchmarks/router_overhead.py [--requests 400] [--rounds 3]

Prints a table and, as its last line, a JSON summary with overhead_ms_{median,p95}_c{1,32}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
BODY = {"model": "bench", "messages": [{"role": "user", "content": "say something short"}],
        "max_tokens": 16}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process for {url} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up in {timeout}s")


async def measure(client: httpx.AsyncClient, url: str, body: dict, n: int,
                  concurrency: int) -> list[float]:
    latencies: list[float] = []
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            queue.pop()
            t0 = time.perf_counter()
            r = await client.post(url, json=body)
            latencies.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise SystemExit(f"{url} answered {r.status_code}: {r.text[:300]}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def litellm_direct(fake_url: str, n: int) -> list[float]:
    """litellm.acompletion from this process straight to the fake: the share of the
    overhead that is litellm's own, measured in the same run."""
    sys.path.insert(0, str(REPO))
    from router.frontier import litellm_module

    litellm = litellm_module()
    kwargs = dict(model="openai/fake-bench", api_base=fake_url, api_key="k", max_retries=0,
                  messages=BODY["messages"], max_tokens=16)
    for _ in range(20):
        await litellm.acompletion(**kwargs)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await litellm.acompletion(**kwargs)
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def run(args: argparse.Namespace, fake_url: str, router_url: str) -> dict:
    results: dict[str, dict[str, list[float]]] = {}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        for url in (fake_url, router_url):  # warm both paths (imports, connection pools)
            await measure(client, f"{url}/chat/completions", BODY, 50, 4)
        for concurrency in (1, 32):
            direct: list[float] = []
            routed: list[float] = []
            for r in range(args.rounds):
                print(f"  c={concurrency} round {r + 1}/{args.rounds}", file=sys.stderr)
                direct += await measure(client, f"{fake_url}/chat/completions", BODY,
                                        args.requests, concurrency)
                routed += await measure(client, f"{router_url}/chat/completions", BODY,
                                        args.requests, concurrency)
            results[f"c{concurrency}"] = {"direct": direct, "routed": routed}
        if args.attribute:
            direct = await measure(client, f"{fake_url}/chat/completions", BODY,
                                   args.requests, 1)
            results["litellm_c1"] = {"direct": direct,
                                     "routed": await litellm_direct(fake_url, args.requests)}
    return results


def summarise(results: dict[str, dict[str, list[float]]]) -> dict:
    summary: dict = {}
    rows = []
    for key, series in results.items():
        d, r = series["direct"], series["routed"]
        med_d, med_r = statistics.median(d), statistics.median(r)
        p95_d, p95_r = pct(d, 0.95), pct(r, 0.95)
        summary[f"overhead_ms_median_{key}"] = round(med_r - med_d, 3)
        summary[f"overhead_ms_p95_{key}"] = round(p95_r - p95_d, 3)
        summary[f"direct_ms_median_{key}"] = round(med_d, 3)
        summary[f"routed_ms_median_{key}"] = round(med_r, 3)
        summary[f"ratio_median_{key}"] = round(med_r / med_d, 3)
        rows.append((key, med_d, med_r, p95_d, p95_r, len(d)))
    print(f"{'conc':<5} {'direct p50':>11} {'routed p50':>11} {'added p50':>10} "
          f"{'direct p95':>11} {'routed p95':>11} {'added p95':>10} {'n':>6}")
    for key, md, mr, pd, pr, n in rows:
        print(f"{key:<5} {md:>9.2f}ms {mr:>9.2f}ms {mr - md:>8.2f}ms {pd:>9.2f}ms "
              f"{pr:>9.2f}ms {pr - pd:>8.2f}ms {n:>6}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per round and path")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per level")
    parser.add_argument("--workers", type=int, default=1, help="router worker processes")
    parser.add_argument("--no-attribute", dest="attribute", action="store_false",
                        help="skip timing litellm alone (the share of overhead that is litellm's)")
    args = parser.parse_args()

    fake_port, router_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.yaml"
        config.write_text(
            f"models:\n  fake:\n    model: openai/fake-bench\n"
            f"    api_base: http://127.0.0.1:{fake_port}/v1\n    api_key: k\n"
            f"    input_cost_per_token: 1.0e-6\n    output_cost_per_token: 2.0e-6\n"
            f"frontier:\n  circuit: {{failure_threshold: 1000}}\n"
            f"routes:\n  bench:\n    targets: [fake]\n")
        try:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.fakes.fake_frontier", "--port", str(fake_port)],
                cwd=REPO, env=env, stdout=subprocess.DEVNULL))
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "router.cli", "serve", "--config", str(config),
                 "--port", str(router_port), "--log-level", "warning",
                 "--workers", str(args.workers)],
                cwd=REPO, env=env, stdout=subprocess.DEVNULL))
            fake_url = f"http://127.0.0.1:{fake_port}/v1"
            router_url = f"http://127.0.0.1:{router_port}/v1"
            wait_up(f"{fake_url}/models", procs[0])
            wait_up(f"http://127.0.0.1:{router_port}/healthz", procs[1])
            results = asyncio.run(run(args, fake_url, router_url))
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=30)
    summary = summarise(results)
    summary["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
    summary["requests_per_level"] = args.requests * args.rounds
    summary["router_workers"] = args.workers
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
