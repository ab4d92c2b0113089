"""What each gateway adds to a chat completion, side by side in one run.

Processes on loopback, all started here: the fake OpenAI-compatible provider
(``benchmarks/fake_provider.py``, a bare ASGI app), the bare pass-through
(``benchmarks/passthrough.py``: Starlette + httpx, the floor for this stack),
``complement serve`` with one route to the
fake, and the LiteLLM proxy with one deployment of the same fake (from the interpreter
named by ``--litellm``; skipped, with a line saying how to get it, when there is none). This
process is the client: the same requests go directly to the fake and through each gateway,
in alternating rounds (the order rotates every round), so all see the same machine load.

Added latency = a percentile through the gateway − the same percentile direct, at each
concurrency, non-streaming; for streams, the time to the first chunk the same way.

    python benchmarks/router_overhead.py [--levels 1,16,64] [--requests 400] [--rounds 3]
        [--litellm .venv-litellm/bin/python]

The LiteLLM proxy cannot share the project's environment (``litellm[proxy]`` pins older
litellm and rich); give it its own:

    python -m venv .venv-litellm && .venv-litellm/bin/pip install 'litellm[proxy]'

Prints tables, then the JSON summary as the last line: for each of ``complement``,
``passthrough`` (httpx), ``passthrough_aiohttp`` and ``litellm_proxy`` and each
concurrency ``cN``, ``added_p50_ms``,
``added_p95_ms``, ``added_p99_ms``; ``stream`` the same for the time to first chunk; and
``ratios``: complement over the peer and over the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
BODY = {"model": "bench", "messages": [{"role": "user", "content": "say something short"}],
        "max_tokens": 16}
STREAM_BODY = {**BODY, "stream": True}
KEY = "sk-bench-0123456789abcdef0123456789abcdef"
"""Every gateway checks an API key, as it would off loopback (the LiteLLM proxy refuses to
start without one); the client sends it to all paths."""
GATEWAYS = ("passthrough", "passthrough_aiohttp", "complement", "litellm_proxy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the process for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} did not come up in {timeout:.0f}s")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(client: httpx.AsyncClient, url: str, n: int, concurrency: int,
                  stream: bool) -> list[float]:
    """Latencies in ms of ``n`` requests, ``concurrency`` at a time: the whole response, or
    for streams the first chunk (the rest is read too, so connections are reused alike)."""
    latencies: list[float] = []
    left = [n]

    async def one_plain() -> float:
        t0 = time.perf_counter()
        r = await client.post(url, json=BODY)
        took = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            raise SystemExit(f"{url} answered {r.status_code}: {r.text[:300]}")
        return took

    async def one_stream() -> float:
        t0 = time.perf_counter()
        first = None
        async with client.stream("POST", url, json=STREAM_BODY) as r:
            if r.status_code != 200:
                raise SystemExit(f"{url} answered {r.status_code}: {(await r.aread())[:300]!r}")
            async for line in r.aiter_lines():
                if first is None and line.startswith("data:"):
                    first = (time.perf_counter() - t0) * 1000
        if first is None:
            raise SystemExit(f"{url} streamed no data line")
        return first

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            latencies.append(await (one_stream() if stream else one_plain()))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def run(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    """{"plain"|"stream": {level: {system: [ms, ...]}}}, systems including "direct"."""
    # Idle connections are dropped before the servers' 5 s keep-alive ends, so a request is
    # never sent on a connection the server is closing (a ReadError, not a measurement).
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256,
                          keepalive_expiry=2.0)
    systems = list(urls)
    out: dict[str, Any] = {"plain": {}, "stream": {}}
    async with httpx.AsyncClient(timeout=120, limits=limits,
                                 headers={"authorization": f"Bearer {KEY}"}) as client:
        for system in systems:  # warm every path: imports, pools, first-call caches
            for stream in (False, True):
                await measure(client, f"{urls[system]}/chat/completions", 100, 8, stream)
        plan = [("plain", level) for level in args.levels]
        plan += [("stream", level) for level in args.stream_levels]
        for kind, level in plan:
            series: dict[str, list[float]] = {s: [] for s in systems}
            for r in range(args.rounds):
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                print(f"  {kind} c={level} round {r + 1}/{args.rounds}: {', '.join(order)}",
                      file=sys.stderr, flush=True)
                for system in order:
                    series[system] += await measure(client, f"{urls[system]}/chat/completions",
                                                    args.requests, level, kind == "stream")
            out[kind][level] = series
    return out


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for kind, levels in results.items():
        for level, series in levels.items():
            direct = series["direct"]
            base = {q: pct(direct, q / 100) for q in (50, 95, 99)}
            title = "time to first chunk, streamed" if kind == "stream" else "whole response"
            print(f"\n{title}, concurrency {level} ({len(direct)} requests per path)")
            print(f"{'path':<20} {'p50':>9} {'p95':>9} {'p99':>9}   {'added p50':>10} "
                  f"{'added p95':>10} {'added p99':>10}")
            for system, values in series.items():
                qs = {q: pct(values, q / 100) for q in (50, 95, 99)}
                added = {q: qs[q] - base[q] for q in qs}
                print(f"{system:<20} {qs[50]:>7.2f}ms {qs[95]:>7.2f}ms {qs[99]:>7.2f}ms   "
                      + ("" if system == "direct" else
                         f"{added[50]:>8.2f}ms {added[95]:>8.2f}ms {added[99]:>8.2f}ms"))
                row = {f"p{q}_ms": round(qs[q], 3) for q in qs}
                if system != "direct":
                    row.update({f"added_p{q}_ms": round(added[q], 3) for q in added})
                where = summary.setdefault("stream", {}) if kind == "stream" else summary
                where.setdefault(system, {})[f"c{level}"] = row
    summary["ratios"] = ratios(summary)
    summary["targets"] = targets(summary)
    return summary


def targets(summary: dict[str, Any]) -> dict[str, Any]:
    """Issue 17's bars, each with the measured value, where the runs needed were made."""
    r = summary["ratios"]
    bars = {"c1_added_p50_vs_litellm_proxy": (r.get("c1_p50_vs_litellm_proxy"), 0.5),
            "c1_added_p50_vs_passthrough": (r.get("c1_p50_vs_passthrough"), 1.5),
            "c64_added_p99_vs_litellm_proxy": (r.get("c64_p99_vs_litellm_proxy"), 0.5),
            "stream_c1_first_chunk_over_passthrough_ms":
                (r.get("stream_c1_p50_minus_passthrough_ms"), 2.0)}
    out = {}
    for name, (value, limit) in bars.items():
        out[name] = {"value": value, "at_most": limit,
                     "met": None if value is None else value <= limit}
    for name, row in out.items():
        print(f"target {name}: {row['value']} (at most {row['at_most']}): "
              f"{'met' if row['met'] else 'not met' if row['met'] is False else 'not measured'}")
    return out


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    """complement's added latency over the peer's and over the floor's, where both ran."""
    out: dict[str, Any] = {}
    for where, prefix in ((summary, ""), (summary.get("stream", {}), "stream_")):
        ours = where.get("complement", {})
        for peer in ("litellm_proxy", "passthrough", "passthrough_aiohttp"):
            theirs = where.get(peer, {})
            for level, row in ours.items():
                if level not in theirs:
                    continue
                for q in (50, 99):
                    a, b = row[f"added_p{q}_ms"], theirs[level][f"added_p{q}_ms"]
                    out[f"{prefix}{level}_p{q}_vs_{peer}"] = round(a / b, 3) if b > 0 else None
        for floor in ("passthrough", "passthrough_aiohttp"):
            for level, row in ours.items():
                if level in where.get(floor, {}):
                    out[f"{prefix}{level}_p50_minus_{floor}_ms"] = round(
                        row["p50_ms"] - where[floor][level]["p50_ms"], 3)
    return out


def find_litellm(given: str | None) -> str | None:
    """An interpreter with ``litellm[proxy]``: --litellm, then .venv-litellm beside the repo."""
    candidates = [given] if given else [str(REPO / ".venv-litellm" / "bin" / "python")]
    for candidate in candidates:
        path = shutil.which(candidate) if candidate and os.sep not in candidate else candidate
        if not path or not Path(path).exists():
            continue
        ok = subprocess.run([path, "-c", "import litellm.proxy.proxy_server"],
                            capture_output=True, timeout=120)
        if ok.returncode == 0:
            return path
        print(f"litellm_proxy: {path} cannot import litellm.proxy "
              f"({ok.stderr.decode(errors='replace').strip().splitlines()[-1:]})",
              file=sys.stderr)
    return None


def start(args: argparse.Namespace, tmp: Path, procs: list[subprocess.Popen]) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HF_HUB_OFFLINE": "1"}
    ports = {name: free_port() for name in ("direct", *GATEWAYS)}
    fake = f"http://127.0.0.1:{ports['direct']}/v1"
    quiet = {"stdout": subprocess.DEVNULL, "cwd": REPO, "env": env}

    def launch(cmd: list[str], health: str, **kw: Any) -> None:
        procs.append(subprocess.Popen(cmd, **{**quiet, **kw}))
        wait_up(health, procs[-1])

    launch([sys.executable, str(REPO / "benchmarks" / "fake_provider.py"),
            "--port", str(ports["direct"])], f"{fake}/models")
    urls = {"direct": fake}
    launch([sys.executable, str(REPO / "benchmarks" / "passthrough.py"), "--upstream", fake,
            "--port", str(ports["passthrough"])],
           f"http://127.0.0.1:{ports['passthrough']}/healthz")
    urls["passthrough"] = f"http://127.0.0.1:{ports['passthrough']}/v1"
    if args.aiohttp_floor:
        launch([sys.executable, str(REPO / "benchmarks" / "passthrough.py"), "--upstream", fake,
                "--port", str(ports["passthrough_aiohttp"]), "--client", "aiohttp"],
               f"http://127.0.0.1:{ports['passthrough_aiohttp']}/healthz")
        urls["passthrough_aiohttp"] = f"http://127.0.0.1:{ports['passthrough_aiohttp']}/v1"
    config = tmp / "complement.yaml"
    config.write_text(
        f"models:\n  fake:\n    model: openai/fake-bench\n    api_base: {fake}\n"
        f"    transport: {args.transport}\n    api_key: k\n"
        f"    input_cost_per_token: 1.0e-6\n    output_cost_per_token: 2.0e-6\n"
        f"frontier:\n  circuit: {{failure_threshold: 1000}}\n"
        f"routes:\n  bench:\n    targets: [fake]\n"
        f"data_dir: {tmp / 'data'}\nserver:\n  api_keys: [{KEY}]\n")
    launch([sys.executable, "-m", "router.cli", "serve", "--config", str(config),
            "--port", str(ports["complement"]), "--log-level", "warning",
            "--workers", str(args.workers)],
           f"http://127.0.0.1:{ports['complement']}/healthz")
    urls["complement"] = f"http://127.0.0.1:{ports['complement']}/v1"
    python = find_litellm(args.litellm)
    if python is None:
        print("litellm_proxy: skipped: no interpreter with litellm[proxy] (make one with "
              "`python -m venv .venv-litellm && .venv-litellm/bin/pip install "
              "'litellm[proxy]'`, or pass --litellm PYTHON)", file=sys.stderr)
        return urls
    proxy_config = tmp / "litellm.yaml"
    proxy_config.write_text(
        "model_list:\n  - model_name: bench\n    litellm_params:\n"
        f"      model: openai/fake-bench\n      api_base: {fake}\n      api_key: k\n"
        f"general_settings:\n  master_key: {KEY}\n"
        "litellm_settings:\n  telemetry: false\n")
    launch([python, "-m", "litellm.proxy.proxy_cli", "--config", str(proxy_config),
            "--host", "127.0.0.1", "--port", str(ports["litellm_proxy"]),
            "--num_workers", str(args.workers)],
           f"http://127.0.0.1:{ports['litellm_proxy']}/health/liveliness",
           stderr=subprocess.DEVNULL)
    urls["litellm_proxy"] = f"http://127.0.0.1:{ports['litellm_proxy']}/v1"
    return urls


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give levels like 1,16,64") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: levels are whole numbers ≥ 1")
    return levels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--levels", type=_levels, default=[1, 16, 64],
                        help="concurrency levels, non-streaming (default 1,16,64)")
    parser.add_argument("--stream-levels", type=_levels, default=[1, 16],
                        help="concurrency levels for time to first chunk (default 1,16)")
    parser.add_argument("--requests", type=int, default=400, help="requests per round and path")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per level")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes for complement and the LiteLLM proxy alike")
    parser.add_argument("--transport", choices=("auto", "http", "litellm"), default="auto",
                        help="complement's transport to the fake (litellm: the path before "
                             "issue 17, for comparison)")
    parser.add_argument("--no-aiohttp-floor", dest="aiohttp_floor", action="store_false",
                        help="skip the second pass-through (aiohttp, the client complement "
                             "uses upstream)")
    parser.add_argument("--litellm", metavar="PYTHON",
                        help="interpreter with litellm[proxy] (default .venv-litellm/bin/python)")
    args = parser.parse_args()

    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            urls = start(args, Path(tmp), procs)
            results = asyncio.run(run(args, urls))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
    summary = summarise(results)
    summary["machine"] = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
                          f"{platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    summary["requests_per_path_and_level"] = args.requests * args.rounds
    summary["workers"] = args.workers
    summary["complement_transport"] = args.transport
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
