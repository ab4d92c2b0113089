"""Keys, budgets and rate limits (issue 37): what they hold and what they cost, in one run.

Processes on loopback, all started here: the fake OpenAI-compatible provider
(``benchmarks/fake_provider.py``), ``complement serve`` with one priced route to it and an
admin key (the database: SQLite under a scratch data directory, or ``--events-url``), and
the same server without any key for the latency baseline. This process is the client.

1. **Budget under concurrency.** A virtual key whose ``max_budget`` covers
   ``--budget-requests`` requests; ``--clients`` clients (64) send chat requests on it at
   once until each is refused. Overshoot = the key's spend − its budget, against one
   request's cost (the claim: ≤ one request's cost).
2. **Rate limit.** A key with ``rpm_limit`` ``--rpm``; ``--rpm-clients`` clients send
   paced requests for ``--rpm-seconds`` s; the most requests admitted in any 60 s window
   (by the time each was sent) against the limit (the claim: within 5 %).
3. **kill -9.** A key with a budget; ``--kill-clients`` clients send chat requests while
   the server is killed with SIGKILL ``--kills`` times (restarted each time); the spend
   read after the last restart against the sum of the costs of the answers the clients
   received (acknowledged). An answer lost in the kill may be charged and not
   acknowledged (``charged_unacknowledged``); an acknowledged cost must never be missing.
0. **The checks alone**, in process: identify + admit for a cached virtual key, and a
   settle (reserve + settle) transaction on SQLite, in µs a call.
4. **Latency of the key checks at c = 1.** The same chat request, one at a time, to the
   server without keys and to the server with keys under: an inference key, a virtual key
   without limits (its spend recorded: one transaction), one with an rpm limit (the same,
   and the minute's window in memory) and one with a budget (its worst case reserved
   and its cost settled: two transactions), request by request in rotating order, and a
   block of as many to the no-key server. Added p50 = a variant's p50 − the no-key
   server's p50; and against the inference key on the same process (the path before
   virtual keys, measured request by request beside them).

    python benchmarks/keys.py [--clients 64] [--budget-requests 40] [--rpm 600]
        [--rpm-seconds 75] [--kills 3] [--latency-requests 300] [--rounds 3]
        [--events-url postgresql+psycopg://...]

Prints each part, then the JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.router_overhead import pct, wait_up  # noqa: E402  (one copy of each)
from router.serving import free_port  # noqa: E402

ADMIN = "bench-admin-key-0123456789abcdef0123456789"
INFER = "bench-inference-key-0123456789abcdef012345"
BODY = {"model": "bench", "messages": [{"role": "user", "content": "say something short"}],
        "max_tokens": 16}
CHAT = "/v1/chat/completions"


class Servers:
    """The fake provider and ``complement serve`` processes, restartable by name."""

    def __init__(self, tmp: Path, events_url: str) -> None:
        self.tmp = tmp
        self.events_url = events_url
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    "HF_HUB_OFFLINE": "1"}
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        self.fake = ""

    def start_fake(self) -> None:
        port = free_port()
        self.fake = f"http://127.0.0.1:{port}/v1"
        self._launch("fake", [sys.executable, str(REPO / "benchmarks" / "fake_provider.py"),
                              "--port", str(port)], f"{self.fake}/models")

    def config(self, name: str, keys: bool) -> Path:
        path = self.tmp / f"{name}.yaml"
        server = (f"server:\n  admin_keys: [{ADMIN}]\n  api_keys: [{INFER}]\n" if keys
                  else "server:\n  api_keys: []\n")
        events = f"events:\n  url: '{self.events_url}'\n" if keys and self.events_url else ""
        path.write_text(
            f"models:\n  fake:\n    model: openai/fake-bench\n    api_base: {self.fake}\n"
            f"    transport: http\n    api_key: k\n"
            f"    input_cost_per_token: 1.0e-6\n    output_cost_per_token: 2.0e-6\n"
            f"frontier:\n  circuit: {{failure_threshold: 100000}}\n"
            f"routes:\n  bench:\n    targets: [fake]\n"
            f"data_dir: {self.tmp / ('data-' + name)}\n{server}{events}")
        return path

    def serve(self, name: str, keys: bool) -> str:
        port = self.ports.setdefault(name, free_port())
        self._launch(name, [sys.executable, "-m", "router.cli", "serve", "--config",
                            str(self.config(name, keys)), "--port", str(port),
                            "--log-level", "warning"], f"http://127.0.0.1:{port}/healthz")
        return f"http://127.0.0.1:{port}"

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def _launch(self, name: str, cmd: list[str], health: str) -> None:
        proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stdout=subprocess.DEVNULL)
        self.procs[name] = proc
        wait_up(health, proc)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def admin(base: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
    r = httpx.request(method, f"{base}{path}", json=body, params=params or None, timeout=60,
                      headers={"Authorization": f"Bearer {ADMIN}"})
    if r.status_code != 200:
        raise SystemExit(f"{method} {path}: {r.status_code} {r.text[:300]}")
    return r.json()


def one_cost(base: str) -> float:
    """What one benchmark request costs (a probe key's answer says)."""
    key = admin(base, "POST", "/key/generate", {"key_name": "probe"})["key"]
    r = httpx.post(f"{base}{CHAT}", json=BODY, headers={"Authorization": f"Bearer {key}"},
                   timeout=60)
    return float(r.headers["x-complement-cost-usd"])


# -- 0. the key checks alone, in process ---------------------------------------------------
def checks_run(tmp: Path, n: int = 20000) -> dict[str, Any]:
    """What the guard does for a virtual key before any endpoint runs — identify (a hash
    and a cached lookup) and admit (expiry, routes, budget, the rpm window) — and the
    settle of a request that cost something (one SQLite transaction on the event loop),
    each in µs a call."""
    from router.keys import KeyGate, KeyStore
    from specialists.tab.events import EventStore, sqlite_url

    events = EventStore(sqlite_url(tmp / "checks"))
    store = KeyStore(events.engine)
    gate = KeyGate([ADMIN], [INFER])
    gate.store = store
    key, record = store.create(max_budget=10.0 ** 6, rpm_limit=10 ** 9)
    token = key.encode()

    async def go() -> dict[str, float]:
        found = await gate.identify(token)
        t0 = time.perf_counter()
        for _ in range(n):
            found = await gate.identify(token)
            gate.admit(found, "tab")
        checks = (time.perf_counter() - t0) / n * 1e6
        t0 = time.perf_counter()
        for _ in range(n // 10):
            store.settle(record.key_hash, None, 1e-6, wait=False)
        settle = (time.perf_counter() - t0) / (n // 10) * 1e6
        t0 = time.perf_counter()
        for _ in range(n // 10):
            store.settle(record.key_hash, store.reserve(record.key_hash, 1e-5, 600, wait=False),
                         1e-6, wait=False)
        both = (time.perf_counter() - t0) / (n // 10) * 1e6
        return {"identify_and_admit_us": checks, "settle_us": settle,
                "reserve_and_settle_us": both}

    try:
        return asyncio.run(go())
    finally:
        store.close()
        events.close()


# -- 1. budget under concurrency ------------------------------------------------------------
async def budget_run(base: str, clients: int, budget_requests: int) -> dict[str, Any]:
    cost = one_cost(base)
    budget = cost * budget_requests
    created = admin(base, "POST", "/key/generate", {"key_name": "concurrency",
                                                    "max_budget": budget})
    headers = {"Authorization": f"Bearer {created['key']}"}
    ok: list[float] = []
    refused = [0]
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits, headers=headers) as client:
        async def worker() -> None:
            while True:
                r = await client.post(f"{base}{CHAT}", json=BODY)
                if r.status_code == 402:
                    refused[0] += 1
                    return
                if r.status_code != 200:
                    raise SystemExit(f"budget run: {r.status_code} {r.text[:300]}")
                ok.append(float(r.headers["x-complement-cost-usd"]))

        await asyncio.gather(*(worker() for _ in range(clients)))
    spend = admin(base, "GET", "/key/info", key=created["token"])
    overshoot = spend["spend"] - budget
    return {"clients": clients, "one_request_usd": cost, "max_budget_usd": budget,
            "admitted": len(ok), "refused": refused[0], "spend_usd": spend["spend"],
            "acknowledged_usd": sum(ok), "overshoot_usd": overshoot,
            "overshoot_in_requests": overshoot / cost, "held_after_usd": spend["held"],
            "holds": overshoot <= cost}


# -- 2. rate limit ------------------------------------------------------------------------
async def rpm_run(base: str, rpm: int, clients: int, seconds: float) -> dict[str, Any]:
    created = admin(base, "POST", "/key/generate", {"key_name": "rpm", "rpm_limit": rpm})
    headers = {"Authorization": f"Bearer {created['key']}"}
    admitted: list[float] = []
    limited = [0]
    # offered: twice the limit, paced (hammering would measure the 2 cores, not the limit)
    gap = 60.0 / rpm / 2 * clients
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=60, headers=headers) as client:
        async def worker(i: int) -> None:
            await asyncio.sleep(gap * i / clients)
            while time.monotonic() < end:
                sent = time.monotonic()
                r = await client.post(f"{base}{CHAT}", json=BODY)
                if r.status_code == 200:
                    admitted.append(sent)
                elif r.status_code == 429:
                    limited[0] += 1
                    assert int(r.headers["retry-after"]) >= 1
                else:
                    raise SystemExit(f"rpm run: {r.status_code} {r.text[:300]}")
                await asyncio.sleep(max(0.0, gap - (time.monotonic() - sent)))

        await asyncio.gather(*(worker(i) for i in range(clients)))
    admitted.sort()
    most, j = 0, 0
    for i, t in enumerate(admitted):  # the most admitted in any 60 s window
        while admitted[j] <= t - 60.0:
            j += 1
        most = max(most, i - j + 1)
    return {"rpm_limit": rpm, "seconds": seconds, "offered_per_minute": 2 * rpm,
            "admitted": len(admitted), "refused_429": limited[0],
            "most_in_any_60s": most, "ratio": most / rpm,
            "holds": abs(most - rpm) <= 0.05 * rpm}


# -- 3. kill -9 ---------------------------------------------------------------------------
async def kill_run(servers: Servers, name: str, base: str, kills: int,
                   clients: int) -> dict[str, Any]:
    created = admin(base, "POST", "/key/generate", {"key_name": "kill9", "max_budget": 1000.0})
    headers = {"Authorization": f"Bearer {created['key']}"}
    acked: list[float] = []
    failed = [0]
    for k in range(kills):
        stop = [False]
        async with httpx.AsyncClient(timeout=30, headers=headers) as client:
            async def worker() -> None:
                while not stop[0]:
                    try:
                        r = await client.post(f"{base}{CHAT}", json=BODY)
                    except httpx.HTTPError:
                        failed[0] += 1
                        await asyncio.sleep(0.05)
                        continue
                    if r.status_code == 200:
                        acked.append(float(r.headers["x-complement-cost-usd"]))
                    else:
                        failed[0] += 1

            tasks = [asyncio.ensure_future(worker()) for _ in range(clients)]
            await asyncio.sleep(1.5 + 0.5 * k)
            servers.kill9(name)  # mid-burst
            await asyncio.sleep(0.2)
            stop[0] = True
            await asyncio.gather(*tasks)
        servers.serve(name, keys=True)
    record = admin(base, "GET", "/key/info", key=created["token"])
    lost = max(0.0, sum(acked) - record["spend"])
    return {"kills": kills, "clients": clients, "acknowledged": len(acked),
            "acknowledged_usd": sum(acked), "spend_usd": record["spend"],
            "requests_charged": record["requests_charged"],
            "charged_unacknowledged": record["requests_charged"] - len(acked),
            "failed_in_kills": failed[0], "lost_usd": lost,
            "equal": abs(record["spend"] - sum(acked)) < 1e-12,
            "holds": lost < 1e-12}


# -- 4. latency of the key checks ---------------------------------------------------------
async def latency_run(nokeys: str, base: str, n: int, rounds: int) -> dict[str, Any]:
    plain_key = admin(base, "POST", "/key/generate", {"key_name": "latency-plain"})["key"]
    rpm_key = admin(base, "POST", "/key/generate", {"key_name": "latency-rpm",
                                                    "rpm_limit": 10 ** 8})["key"]
    budget_key = admin(base, "POST", "/key/generate", {"key_name": "latency-budget",
                                                       "max_budget": 10 ** 6})["key"]
    variants = {"no_keys": (nokeys, None), "inference_key": (base, INFER),
                "virtual_plain": (base, plain_key), "virtual_rpm": (base, rpm_key),
                "virtual_budget": (base, budget_key)}
    took: dict[str, list[float]] = {v: [] for v in variants}
    names = list(variants)
    async with httpx.AsyncClient(timeout=60) as client:
        async def one(name: str) -> float:
            url, key = variants[name]
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            t0 = time.perf_counter()
            r = await client.post(f"{url}{CHAT}", json=BODY, headers=headers)
            if r.status_code != 200:
                raise SystemExit(f"latency run {name}: {r.status_code} {r.text[:300]}")
            return (time.perf_counter() - t0) * 1000

        for name in names * 10:  # warm the connections and the key cache
            await one(name)
        keyed = names[1:]
        for rnd in range(rounds):
            # a block on each server, their order alternating; on the keyed server the
            # variants interleave request by request, the order rotating (a server process
            # left idle between requests answers slower: both blocks keep theirs busy)
            for block in (("no_keys", "keyed") if rnd % 2 == 0 else ("keyed", "no_keys")):
                for i in range(n):
                    if block == "no_keys":
                        took["no_keys"].append(await one("no_keys"))
                        continue
                    for name in keyed[i % len(keyed):] + keyed[:i % len(keyed)]:
                        took[name].append(await one(name))
    p50 = {name: pct(v, 0.5) for name, v in took.items()}
    base_p50 = p50["inference_key"]
    return {"requests_per_variant": n * rounds, "p50_ms": p50,
            "added_p50_ms_vs_inference_key": {name: p50[name] - base_p50 for name in keyed
                                              if name != "inference_key"},
            "p95_ms": {name: pct(v, 0.95) for name, v in took.items()},
            "added_p50_ms": {name: p50[name] - p50["no_keys"] for name in variants
                             if name != "no_keys"},
            "ratio_p50": {name: p50[name] / p50["no_keys"] for name in variants
                          if name != "no_keys"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients, part 1")
    parser.add_argument("--budget-requests", type=int, default=40,
                        help="requests the part-1 key's budget covers (default 40)")
    parser.add_argument("--rpm", type=int, default=600, help="rpm_limit, part 2 (default 600)")
    parser.add_argument("--rpm-clients", type=int, default=4, help="clients, part 2")
    parser.add_argument("--rpm-seconds", type=float, default=75.0,
                        help="how long part 2 runs (≥ 60 to fill a window; default 75)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs, part 3 (default 3)")
    parser.add_argument("--kill-clients", type=int, default=8, help="clients, part 3")
    parser.add_argument("--latency-requests", type=int, default=300,
                        help="requests per variant and round, part 4 (default 300)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="part 4 sends requests x rounds requests per variant")
    parser.add_argument("--events-url", default="",
                        help="the keyed server's database (default: SQLite in a scratch dir)")
    parser.add_argument("--skip", default="", help="parts to leave out, e.g. rpm,kill")
    args = parser.parse_args()
    if args.rpm_seconds < 60 and "rpm" not in args.skip:
        parser.error("--rpm-seconds must be at least 60: the limit is per minute")
    skip = set(args.skip.split(","))
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = Servers(Path(tmp), args.events_url)
        if "checks" not in skip:
            summary["checks"] = checks_run(Path(tmp))
            print(f"checks: {json.dumps(summary['checks'])}", flush=True)
        try:
            servers.start_fake()
            base = servers.serve("keys", keys=True)
            nokeys = servers.serve("nokeys", keys=False)
            for part, run in (
                    ("latency", lambda: latency_run(nokeys, base, args.latency_requests,
                                                    args.rounds)),
                    ("budget", lambda: budget_run(base, args.clients, args.budget_requests)),
                    ("rpm", lambda: rpm_run(base, args.rpm, args.rpm_clients,
                                            args.rpm_seconds)),
                    ("kill", lambda: kill_run(servers, "keys", base, args.kills,
                                              args.kill_clients))):
                if part in skip:
                    continue
                summary[part] = asyncio.run(run())
                print(f"{part}: {json.dumps(summary[part])}", flush=True)
        finally:
            servers.stop()
    summary["machine"] = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
                          f"{platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    summary["database"] = "postgresql" if args.events_url else "sqlite"
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
