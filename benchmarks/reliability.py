"""Reliability under load, provider faults, crashes and hostile input (issue 18).

Everything runs on loopback and is started here: the fake provider
(``router/demo_provider.py``, one model per fault through an ``X-Fake-Behaviour``
header), ``complement serve`` on a config written for the run, and this process as the
client. Five sections, each bounded in time, selectable with ``--only``:

load        a mix of /v1/tab, /v1/apply, /v1/retrieve and /v1/chat/completions at rising
            concurrency (1 → 64): throughput, p50/p99 per endpoint, errors by status, and
            the concurrency where p99 of /v1/tab passes 50 ms.
faults      the provider answers 429, 500, 502, 503, 401, times out, hangs up, sends
            malformed, empty, HTML or truncated bodies, breaks a stream off, sends an error
            event mid-stream, stalls mid-stream, or refuses the connection; through both
            transports (straight HTTP and litellm), streamed and not, alone and with a
            fallback model. Every request must end in a fallback or a clear error (never a
            500 of ours, never a hang).
durability  Tab actions then feedback for them stream in while the server is killed with
            SIGKILL and restarted (``--kills``): every event acknowledged with a 200 must be
            in the store once. SQLite, or PostgreSQL with ``--events-url`` / ``--postgres``.
fuzz        Schemathesis cases from the server's own OpenAPI schema (every body documented,
            chat's and feedback's included), valid and invalid, against the live server: no
            5xx, no hang. Every phase and check: ``benchmarks/api_contract.py``.
hostile     oversized and chunked bodies, invalid UTF-8, lone surrogates, deep nesting,
            non-JSON, odd numbers, URL and header tricks, and path tricks (``..``, absolute
            paths, symlinks out of the allowed roots, a model answer naming a path outside)
            on /v1/edit, /v1/index and /v1/apply: no 5xx, no hang, nothing written outside
            the allowed roots.
security    issue 41's findings, one probe each (``router/audit/f*.py``, as ``complement
            audit`` runs them), each against a real server of its own on loopback,
            configured as the finding needs: a chat request pointing the provider elsewhere, keyless servers on every
            interface, a model's answer writing or running outside the request, symlink
            races, secrets in the default root, cross-site requests, a session silenced by
            its seq, oversized requests, slow clients, what /readyz shows. Counts attempts,
            leaks, writes outside the request and commands run (all must be 0), and any
            other broken expectation.

    python benchmarks/reliability.py [--quick]
        [--only load,faults,durability,fuzz,hostile,security] [--findings F1,F3,...]
        [--engine single] [--workers 1] [--levels 1,2,4,8,16,32,64] [--seconds 4]
        [--kills 5] [--fuzz-cases 2400] [--events-url URL | --postgres]

Prints a line per step on stderr, then the JSON summary as the last line of stdout:
``fuzz_cases``, ``fuzz_5xx``, ``fuzz_hangs``, ``fuzz_fault_routes_5xx`` (502s the fault routes
answer as documented, not defects); ``faults_total``, ``faults_survived``;
``kills``, ``acknowledged``, ``acknowledged_lost``, ``duplicated``; ``hostile_cases``,
``hostile_5xx``, ``hostile_hangs``, ``written_outside``; ``security_attempts``,
``security_leaks``, ``security_writes_outside``, ``security_commands_run``,
``security_failures`` and ``security`` (per finding); ``load`` per server engine and
concurrency; ``ok`` (every invariant held; the exit status is 1 when not).

``--engine`` names how the server runs (``ENGINES``): ``single`` is ``complement serve``
(``--workers`` processes); ``ray`` is ``complement serve --engine ray`` (a local cluster the
command starts; ``--workers`` Tab replicas). With ``ray`` the faults section also SIGKILLs a
Tab replica mid-burst (``replica_kill``: every request answered, the replica replaced), and
the durability kills go round the whole server, a Tab replica and the ingress replica.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures as cf
import hashlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("load", "faults", "durability", "fuzz", "hostile", "security")
TAB_P99_LIMIT_MS = 50.0
HANG_S = 30.0
"""A request that has not finished after this long is a hang."""


def log(msg: str) -> None:
    print(f"[reliability {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 3)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


# -- the processes ---------------------------------------------------------------------------
@dataclass
class Server:
    """One server under test: start it, kill it (SIGKILL), stop it (SIGTERM)."""

    command: list[str]
    port: int
    cwd: Path
    log_path: Path
    proc: subprocess.Popen | None = None
    starts: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 300) -> float:
        """Start and wait until /readyz says ready; the seconds it took."""
        started = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.command, cwd=self.cwd, env=child_env(),
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise SystemExit(f"the server exited with {self.proc.returncode}:\n{tail}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    took = time.monotonic() - started
                    self.starts.append(round(took, 2))
                    return took
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"the server at {self.url} was not ready in {timeout:.0f}s")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


def single_process(config: Path, port: int, cwd: Path, log_path: Path, workers: int) -> Server:
    """``complement serve``: uvicorn in one process (or ``--workers`` processes)."""
    return Server([sys.executable, "-m", "router.cli", "serve", "--config", str(config),
                   "--port", str(port), "--log-level", "warning", "--workers", str(workers)],
                  port, cwd, log_path)


def _port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


class RayServer(Server):
    """Stopped with SIGTERM to the command alone (it takes its cluster down in order); a
    kill is SIGKILL to the whole group, then a wait until the port is let go of — the
    cluster's workers, which are not in the group, need a few seconds to notice."""

    def kill(self) -> None:
        super().kill()
        deadline = time.monotonic() + 60
        while not _port_closed(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def ray_serve(config: Path, port: int, cwd: Path, log_path: Path, tab_replicas: int) -> Server:
    """``complement serve --engine ray``: a local Ray cluster started by the command, each
    specialist its own deployment, ``tab_replicas`` Tab replicas (``--workers``)."""
    data = yaml.safe_load(config.read_text())
    data["engine"] = {"ray": {"deployments": {"tab": {"num_replicas": tab_replicas}}}}
    ray_config = config.with_name(f"{config.stem}-ray.yaml")
    ray_config.write_text(yaml.safe_dump(data, sort_keys=False))
    return RayServer([sys.executable, "-m", "router.cli", "serve", "--engine", "ray",
                      "--config", str(ray_config), "--port", str(port), "--log-level",
                      "warning"], port, cwd, log_path)


#: How the server under test runs: a function building its ``Server`` from the config.
ENGINES: dict[str, Callable[[Path, int, Path, Path, int], Server]] = {
    "single": single_process, "ray": ray_serve}


def replica_pids(server: Server, deployment: str, app: str = "complement") -> list[int]:
    """The processes of a Ray Serve deployment's replicas under ``server`` (its local
    cluster's workers are its descendants)."""
    if server.proc is None:
        return []
    from router.ray_serve import replica_pids as pids

    return pids(server.proc.pid, deployment, app)


def kill_replica(server: Server, deployment: str, timeout: float = 120) -> dict[str, Any]:
    """SIGKILL one replica of ``deployment``; wait until Serve has replaced it."""
    before = replica_pids(server, deployment)
    if not before:
        raise SystemExit(f"no replica of {deployment} found under the server")
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        now = replica_pids(server, deployment)
        if len(now) == len(before) and victim not in now:
            return {"killed": victim, "replaced_in_s": round(time.monotonic() - started, 2)}
        time.sleep(0.2)
    return {"killed": victim, "replaced_in_s": None}


@contextmanager
def fake_provider(tmp: Path) -> Iterator[str]:
    port = free_port()
    with open(tmp / "fake.log", "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "router.demo_provider",
                                 "--port", str(port), "--default", "ok"], cwd=REPO, env=child_env(),
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the fake provider did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- the config ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fault:
    name: str
    behaviour: str
    """The fake provider's behaviour (``router/demo_provider.py``)."""
    modes: tuple[bool, ...] = (False, True)
    """Which of non-streaming (False) and streaming (True) requests meet it."""
    refused: bool = False
    """No fake at all: the model's api_base is a closed port."""


FAULTS = (
    Fault("rate_limited_429", "429:0"),
    Fault("server_error_500", "500"),
    Fault("bad_gateway_502", "502"),
    Fault("unavailable_503", "503"),
    Fault("bad_key_401", "401"),
    Fault("timeout", "slow:6"),
    Fault("malformed_json", "malformed", (False,)),
    Fault("truncated_body", "truncated", (False,)),
    Fault("truncated_stream", "truncated", (True,)),
    Fault("empty_body", "empty"),
    Fault("not_a_completion", "no-choices", (False,)),
    Fault("html_error_page", "html:502"),
    Fault("hang_up", "hangup"),
    Fault("disconnect_mid_stream", "disconnect:2", (True,)),
    Fault("error_event_mid_stream", "error-event:2", (True,)),
    Fault("stall_mid_stream", "stall:2", (True,)),
    Fault("connection_refused", "", refused=True),
)
TRANSPORTS = ("http", "litellm")
BODY_TIMEOUT_S = 2.0
FAULT_TIMEOUT_S = 1.5
"""The fault models' timeout: the ``timeout`` and ``stall`` faults last longer than it."""


def _model(fake: str, behaviour: str, transport: str, timeout_s: float,
           refused_base: str | None = None) -> dict[str, Any]:
    model: dict[str, Any] = {"model": "openai/fake", "api_base": refused_base or fake,
                             "api_key": "k", "timeout_s": timeout_s, "transport": transport,
                             "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
    if behaviour:
        model["params"] = {"extra_headers": {"X-Fake-Behaviour": behaviour}}
    return model


def write_config(tmp: Path, fake: str, events_url: str, *, full: bool = True,
                 tab_max_batch: int | None = None) -> Path:
    """The server's config: an ``ok`` model, one model per fault and transport, a route with
    each fault alone (``only-…``) and one with ``ok`` behind it (``fb-…``)."""
    refused = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    models = {"ok": _model(fake, "", "http", 10.0), "ok-litellm": _model(fake, "", "litellm", 10.0)}
    # "auto" is the route /v1/edit takes by default
    routes: dict[str, Any] = {"chat": {"targets": ["ok"]}, "auto": {"targets": ["ok"]}}
    for fault in FAULTS:
        for transport in TRANSPORTS:
            name = f"{fault.name}-{transport}"
            models[name] = _model(fake, fault.behaviour, transport, FAULT_TIMEOUT_S,
                                  refused if fault.refused else None)
            routes[f"only-{name}"] = {"targets": [name], "budget": {"latency_s": 20}}
            routes[f"fb-{name}"] = {"targets": [name, "ok"], "budget": {"latency_s": 20}}
    for i, answer in enumerate(HOSTILE_ANSWERS):
        answer = answer.replace("{outside}", str(tmp / "outside"))
        models[f"hostile-{i}"] = _model(fake, "text64:" + base64.b64encode(answer.encode())
                                        .decode(), "http", 10.0)
        routes[f"hostile-{i}"] = {"targets": [f"hostile-{i}"]}
    specialists: dict[str, Any] = {"tab": {"class": "specialists.tab:TabSpecialist",
                                           "options": {"sample": True, "log_features": True}}}
    if tab_max_batch is not None:  # 1: no batching, for the comparison
        specialists["tab"]["options"]["max_batch"] = tab_max_batch
    if full:
        specialists["apply"] = {"class": "specialists.apply.specialist:ApplySpecialist"}
        specialists["retrieval"] = {
            "class": "retrieval.specialist:RetrievalSpecialist",
            "options": {"allowed_root": str(tmp / "repos"), "embedder": "static",
                        "index_dir": str(tmp / "data" / "indexes")}}
    config = {
        "data_dir": str(tmp / "data"),
        "events": {"url": events_url, "feedback_timeout_s": 3600},
        "frontier": {"retry": {"attempts": 2, "backoff_initial_s": 0.05, "backoff_max_s": 0.2,
                               "retry_after_max_s": 1},
                     # every request meets its fault (an open circuit would answer first)
                     "circuit": {"failure_threshold": 100000}},
        "models": models, "routes": routes, "specialists": specialists,
        "workspace": {"allowed_roots": [str(tmp / "repos")]},
        # hostile: a body that stalls is answered 408 after this (default 30 s)
        "server": {"body_timeout_s": BODY_TIMEOUT_S},
    }
    path = tmp / ("config.yaml" if full else "config-tab.yaml")
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def make_tree(tmp: Path) -> None:
    """repos/proj (the allowed root's repository, with symlinks out of it), outside/ (what
    must never change), cwd/ (the server's working directory)."""
    proj = tmp / "repos" / "proj"
    proj.mkdir(parents=True)
    for src in sorted((REPO / "specialists" / "apply").glob("*.py"))[:12]:
        shutil.copy(src, proj / src.name)
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 'do not touch'\n")
    (proj / "escape").symlink_to(outside, target_is_directory=True)
    (proj / "link.py").symlink_to(outside / "secret.py")
    (tmp / "repos" / "escape-root").symlink_to(outside, target_is_directory=True)
    (tmp / "cwd").mkdir()
    (tmp / "data").mkdir()


# -- request bodies --------------------------------------------------------------------------
README_TAB = ("def {n}_add(a, b):\n    return a + b\n\n\ndef {n}_sub(a, b):\n    return a - b"
              "\n\n\ndef {n}_mul(a, b):\n    ret")


def tab_bodies(count: int, seed: int = 0, readme_every: int = 2) -> list[dict[str, Any]]:
    """One in ``readme_every`` the README's keystroke (shown two times in three), the rest a
    cursor inside this repository's code (rarely shown)."""
    rng = random.Random(seed)
    files = [p.read_text() for p in sorted((REPO / "specialists" / "apply").glob("*.py"))]
    bodies = []
    for i in range(count):
        if i % readme_every == 0:
            text = README_TAB.format(n=f"f{rng.randrange(10**6)}")
            bodies.append({"file": text, "cursor": len(text), "language": "python",
                           "path": "calc.py"})
            continue
        text = rng.choice(files)
        lines = text.splitlines(keepends=True)
        k = rng.randrange(len(lines) // 4, len(lines))
        cursor = sum(map(len, lines[:k])) + min(len(lines[k].rstrip()), rng.randint(6, 30))
        bodies.append({"file": text, "cursor": cursor, "language": "python", "path": "m.py"})
    return bodies


def apply_body() -> dict[str, Any]:
    fixture = REPO / "tests" / "apply" / "fixtures" / "py_hash_markers"
    return {"original": (fixture / "original.py").read_text(),
            "sketch": (fixture / "sketch.py").read_text(), "path": "app.py"}


QUERIES = ("merge the sketch into the file", "find the anchor lines", "fuzzy similarity ratio",
           "markers for existing code", "language of a path", "deleted lines check",
           "floating block placement", "unified diff of two texts")


def chat_body(route: str = "chat", stream: bool = False) -> dict[str, Any]:
    return {"model": route, "stream": stream, "max_tokens": 32,
            "messages": [{"role": "user", "content": "one two three four five six seven eight "
                                                     "nine ten eleven twelve"}]}


# -- load ------------------------------------------------------------------------------------
MIX = ("tab", "tab", "apply", "tab", "retrieve", "chat", "tab", "apply", "retrieve", "tab")
"""Half Tab, a fifth apply, a fifth retrieval, a tenth chat."""


def _load_requests() -> dict[str, Any]:
    import orjson

    return {"tab": [("/v1/tab", orjson.dumps(b)) for b in tab_bodies(64, seed=7)],
            "apply": [("/v1/apply", orjson.dumps(apply_body()))],
            "retrieve": [("/v1/retrieve", orjson.dumps({"query": q, "k": 5})) for q in QUERIES],
            "chat": [("/v1/chat/completions", orjson.dumps(chat_body()))]}


async def _drive(url: str, level: int, seconds: float, requests: dict[str, Any]
                 ) -> list[tuple[str, int, float]]:
    """``level`` clients, each sending the mix back to back for ``seconds``:
    (endpoint, status or 0 for a transport error, ms) per request."""
    import aiohttp

    results: list[tuple[str, int, float]] = []
    stop_at = time.monotonic() + seconds
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=HANG_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def client(k: int) -> None:
            i = k
            while time.monotonic() < stop_at:
                kind = MIX[i % len(MIX)]
                path, body = requests[kind][i % len(requests[kind])]
                i += 1
                t0 = time.perf_counter()
                try:
                    async with session.post(url + path, data=body, headers=headers) as r:
                        await r.read()
                        status = r.status
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    status = 0
                results.append((kind, status, (time.perf_counter() - t0) * 1000))

        await asyncio.gather(*(client(k * 3) for k in range(level)))
    return results


def _level_summary(results: list[tuple[str, int, float]], seconds: float) -> dict[str, Any]:
    endpoints: dict[str, Any] = {}
    errors: dict[str, int] = {}
    for kind in ("tab", "apply", "retrieve", "chat"):
        mine = [r for r in results if r[0] == kind]
        ok = [ms for _, status, ms in mine if status == 200]
        endpoints[kind] = {"n": len(mine), "ok": len(ok), "p50_ms": pct(ok, 0.5),
                           "p99_ms": pct(ok, 0.99)}
        for _, status, _ in mine:
            if status != 200:
                key = f"{kind}:{status or 'transport'}"
                errors[key] = errors.get(key, 0) + 1
    return {"throughput_rps": round(len(results) / seconds, 1), "requests": len(results),
            "endpoints": endpoints, "errors": errors}


def _index(url: str) -> None:
    index = httpx.post(f"{url}/v1/index", json={"path": "proj"}, timeout=300)
    if index.status_code != 200:
        raise SystemExit(f"/v1/index answered {index.status_code}: {index.text[:300]}")


def section_load(ctx: "Context") -> dict[str, Any]:
    url = ctx.server.url
    _index(url)
    requests = _load_requests()
    asyncio.run(_drive(url, 4, 1.0 if ctx.args.quick else 3.0, requests))  # warm every path
    per_level: dict[str, Any] = {}
    over_at = None
    for level in ctx.args.levels:
        if ctx.out_of_time("load"):
            break
        log(f"load: concurrency {level} for {ctx.args.seconds:g}s")
        started = time.monotonic()
        results = asyncio.run(_drive(url, level, ctx.args.seconds, requests))
        row = _level_summary(results, time.monotonic() - started)
        per_level[f"c{level}"] = row
        tab = row["endpoints"]["tab"]
        log(f"  {row['throughput_rps']} req/s; tab p50 {tab['p50_ms']} ms p99 {tab['p99_ms']} ms;"
            f" errors {row['errors'] or 'none'}")
        if over_at is None and (tab["p99_ms"] or 0) > TAB_P99_LIMIT_MS:
            over_at = level
    tab = httpx.get(f"{url}/readyz", timeout=10).json()["specialists"].get("tab", {})
    return {"levels": per_level, "tab_p99_over_50ms_at": over_at,
            "errors_total": sum(sum(r["errors"].values()) for r in per_level.values()),
            # how the Tab model worker batched (with Ray: the replica /readyz asked)
            "tab_worker": tab.get("worker")}


# -- faults ----------------------------------------------------------------------------------
def _read_stream(response: httpx.Response, deadline: float) -> tuple[list[Any], bool]:
    """The stream's events (parsed) and whether it ended with [DONE]."""
    events: list[Any] = []
    for line in response.iter_lines():
        if time.monotonic() > deadline:
            raise TimeoutError("the stream did not end in time")
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return events, True
        events.append(json.loads(data))
    return events, False


def _is_clear_error(status: int, body: Any) -> bool:
    """4xx/5xx in OpenAI's error shape with a message; 500 is never one (it means a bug)."""
    error = body.get("error") if isinstance(body, dict) else None
    return status >= 400 and status != 500 and isinstance(error, dict) and bool(
        error.get("message"))


def judge_chat(url: str, route: str, stream: bool) -> dict[str, Any]:
    """One chat request: ``fallback`` (answered by ``ok``), ``clear_error``, or ``bad``."""
    started = time.monotonic()
    deadline = started + HANG_S
    out: dict[str, Any] = {"route": route, "stream": stream}
    try:
        with httpx.Client(timeout=HANG_S) as client, client.stream(
                "POST", f"{url}/v1/chat/completions", json=chat_body(route, stream)) as r:
            out["status"] = r.status_code
            model = r.headers.get("x-complement-model")
            if r.status_code != 200 or not stream:
                body = json.loads(r.read() or b"null")
                if r.status_code == 200:
                    answered = body.get("choices", [{}])[0].get("message", {}).get("content")
                    out["result"] = "fallback" if model and model.startswith("ok") and \
                        answered else "bad"
                else:
                    out["result"] = "clear_error" if _is_clear_error(r.status_code, body) \
                        else "bad"
                    out["error"] = str((body or {}).get("error", {}).get("message", ""))[:160]
            else:
                events, done = _read_stream(r, deadline)
                errors = [e for e in events if isinstance(e, dict) and e.get("error")]
                text = "".join(c.get("delta", {}).get("content") or "" for e in events
                               if isinstance(e, dict) for c in e.get("choices", []))
                if not done:
                    out["result"] = "bad"  # a stream that stops without saying why
                elif errors:
                    out["result"] = "clear_error"
                    out["error"] = str(errors[0]["error"].get("message", ""))[:160]
                else:
                    out["result"] = "fallback" if model and model.startswith("ok") and \
                        "twelve" in text else "bad"
    except (httpx.TimeoutException, TimeoutError):
        out["result"] = "hang"
    except (httpx.TransportError, ValueError) as exc:
        out["result"] = "bad"
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def judge_edit(url: str, route: str, _stream: bool) -> dict[str, Any]:
    """One /v1/edit through the route: ``fallback`` (the ``ok`` model answered),
    ``clear_error`` (a refusal in the error shape, or ``failed`` with the reason), or ``bad``."""
    started = time.monotonic()
    out: dict[str, Any] = {"route": route, "endpoint": "edit"}
    try:
        r = httpx.post(f"{url}/v1/edit", timeout=HANG_S, json={
            "instruction": "rename x to y", "route": route, "texts": {"a.py": "x = 1\n"}})
        body = r.json()
        out["status"] = r.status_code
        if r.status_code == 200 and str(body.get("model") or "").startswith("ok"):
            out["result"] = "fallback"
        elif r.status_code == 200:
            out["result"] = "clear_error" if body.get("status") == "failed" and \
                body.get("reason") else "bad"
            out["error"] = str(body.get("reason"))[:160]
        else:
            out["result"] = "clear_error" if _is_clear_error(r.status_code, body) else "bad"
    except httpx.TimeoutException:
        out["result"] = "hang"
    except (httpx.TransportError, ValueError) as exc:
        out["result"], out["error"] = "bad", f"{type(exc).__name__}: {exc}"
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def section_faults(ctx: "Context") -> dict[str, Any]:
    """Each fault, through each transport, alone (``only-``: a clear error) and with the
    ``ok`` model behind it (``fb-``: a fallback, or an in-band error once a stream has
    begun): chat streamed and not, and /v1/edit."""
    jobs = [(fault, transport, prefix, judge, stream)
            for fault in FAULTS for transport in TRANSPORTS for prefix in ("only", "fb")
            for judge, stream in [(judge_chat, m) for m in fault.modes]
            + [(judge_edit, False)] * (False in fault.modes)]  # edits do not stream
    log(f"faults: {len(FAULTS)} kinds x {len(TRANSPORTS)} transports, {len(jobs)} requests")
    results: dict[str, Any] = {f.name: {"requests": 0, "fallback": 0, "clear_error": 0,
                                         "bad": []} for f in FAULTS}
    with cf.ThreadPoolExecutor(max_workers=16) as pool:  # mostly waiting on timeouts
        futures = {pool.submit(judge, ctx.server.url, f"{prefix}-{fault.name}-{transport}",
                               stream): fault
                   for fault, transport, prefix, judge, stream in jobs}
        for future in cf.as_completed(futures):
            fault, outcome = futures[future], future.result()
            row = results[fault.name]
            row["requests"] += 1
            if outcome["result"] in ("fallback", "clear_error"):
                row[outcome["result"]] += 1
            else:
                row["bad"].append(outcome)
    survived = [name for name, row in results.items() if not row["bad"]]
    for name, row in results.items():
        log(f"  {name:<24} {row['fallback']} fallbacks, {row['clear_error']} clear errors"
            + (f", BAD: {row['bad']}" if row["bad"] else ""))
    out = {"kinds": results, "faults_total": len(FAULTS), "faults_survived": len(survived),
           "requests": len(jobs)}
    if ctx.args.engine == "ray":
        out["replica_kill"] = replica_kill_burst(ctx.server)
    return out


def replica_kill_burst(server: Server, clients: int = 8, seconds: float = 6.0) -> dict[str, Any]:
    """A Tab replica SIGKILLed a second into a burst of keystrokes: every request must still
    be answered (the ingress sends a call that met the dead replica again) and Serve must
    start a replacement."""
    codes: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    bodies = tab_bodies(16, seed=7)

    def editor(k: int) -> None:
        with httpx.Client(base_url=server.url, timeout=HANG_S) as client:
            i = k
            while not stop.is_set():
                try:
                    status = client.post("/v1/tab", json=bodies[i % len(bodies)]).status_code
                except httpx.TransportError:
                    status = 0
                i += 1
                with lock:
                    codes[status] = codes.get(status, 0) + 1

    def ready_tab() -> dict[str, Any]:
        return httpx.get(f"{server.url}/readyz", timeout=10).json()["specialists"]["tab"]

    retried_before = ready_tab().get("calls_retried", 0)
    threads = [threading.Thread(target=editor, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    kill = kill_replica(server, "specialist-tab")
    time.sleep(max(0.0, seconds - 1.0))
    stop.set()
    for t in threads:
        t.join(timeout=HANG_S)
    row = {**kill, "requests": sum(codes.values()), "statuses": codes,
           "failed": sum(n for code, n in codes.items() if code != 200),
           "calls_retried": ready_tab().get("calls_retried", 0) - retried_before}
    log(f"  tab replica killed mid-burst: {row}")
    return row


# -- durability ------------------------------------------------------------------------------
@dataclass
class Ledger:
    """What the server acknowledged, what was in flight when it died, and what is waiting
    for feedback."""

    actions: set[str] = field(default_factory=set)
    feedback: dict[str, str] = field(default_factory=dict)
    in_flight: dict[str, str] = field(default_factory=dict)
    waiting: list[tuple[str, str]] = field(default_factory=list)
    """Shown suggestions and the outcome the user will give them."""
    recorded_again: int = 0
    """Acknowledged feedback that a later resend found missing (recorded anew): lost."""
    errors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def next_feedback(self, rng: random.Random) -> list[tuple[str, str]]:
        """Up to a few waiting outcomes; when none wait, one already acknowledged (a client
        resending, as after a timeout: it must come back a duplicate)."""
        with self.lock:
            if self.waiting:
                size = rng.choice((1, 1, 4, 16))
                items, self.waiting = self.waiting[:size], self.waiting[size:]
                return items
            if self.feedback:
                rid = rng.choice(sorted(self.feedback)) if len(self.feedback) < 64 else \
                    next(iter(self.feedback))
                return [(rid, self.feedback[rid])]
        return []


def _feedback_batch(client: httpx.Client, items: list[tuple[str, str]], ledger: Ledger) -> None:
    with ledger.lock:
        acknowledged = {rid for rid, _ in items if rid in ledger.feedback}
        ledger.in_flight.update(items)
    body: Any = ({"request_id": items[0][0], "outcome": items[0][1]} if len(items) == 1 else
                 {"feedback": [{"request_id": rid, "outcome": o} for rid, o in items]})
    r = client.post("/v1/feedback", json=body)
    if r.status_code != 200:
        ledger.error(f"feedback:{r.status_code}")
        return
    answers = [r.json()] if len(items) == 1 else r.json()["results"]
    with ledger.lock:
        for (rid, outcome), answer in zip(items, answers):
            status = answer.get("status")
            if status in ("recorded", "duplicate"):
                ledger.feedback[rid] = outcome
                ledger.in_flight.pop(rid, None)
                ledger.recorded_again += status == "recorded" and rid in acknowledged
            else:
                key = f"feedback_item:{answer.get('status_code')}"
                ledger.errors[key] = ledger.errors.get(key, 0) + 1


def _editor(url: str, ledger: Ledger, stop: threading.Event, seed: int) -> None:
    """Keystrokes until ``stop`` or the server dies: each acknowledged action is noted,
    each shown suggestion waits for its feedback."""
    rng = random.Random(seed)
    bodies = tab_bodies(40, seed=seed, readme_every=1)  # mostly shown
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        i = 0
        while not stop.is_set():
            body = {**bodies[i % len(bodies)], "request_id": f"d{seed}-{uuid.uuid4().hex}"}
            i += 1
            try:
                r = client.post("/v1/tab", json=body)
            except httpx.TransportError:
                return  # the server is gone
            if r.status_code != 200:
                ledger.error(f"tab:{r.status_code}")
                continue
            with ledger.lock:
                ledger.actions.add(body["request_id"])
                if r.json().get("suggestion"):
                    ledger.waiting.append((body["request_id"],
                                           rng.choice(("accepted", "rejected"))))


def _feedback_stream(url: str, ledger: Ledger, stop: threading.Event, seed: int) -> None:
    """Feedback, one at a time or in batches, until ``stop`` or the server dies; what got
    no answer stays in ``ledger.in_flight``."""
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        while not stop.is_set():
            items = ledger.next_feedback(rng)
            if not items:
                time.sleep(0.01)
                continue
            try:
                _feedback_batch(client, items, ledger)
            except httpx.TransportError:
                return


def _run(targets: list[tuple[Callable[..., None], int]], url: str, ledger: Ledger,
         seconds: float, kill: Callable[[], None] | None = None) -> None:
    stop = threading.Event()
    threads = [threading.Thread(target=fn, args=(url, ledger, stop, seed), daemon=True)
               for fn, seed in targets]
    for t in threads:
        t.start()
    time.sleep(seconds)
    if kill is not None:
        kill()
    stop.set()
    for t in threads:
        t.join(timeout=HANG_S)


def _kill_round(server: Server, ledger: Ledger, round_: int, rng: random.Random,
                quick: bool, kill: Callable[[], None] | None = None) -> float:
    """Tab actions for a while; then feedback streams in (with more keystrokes beside it)
    and the server (or ``kill``'s victim) is killed at a random moment of it. The seconds
    into the stream."""
    base = round_ * 100
    _run([(_editor, base + k) for k in range(6)], server.url, ledger, 1.0 if quick else 3.0)
    seconds = rng.uniform(0.3, 1.0) if quick else rng.uniform(0.5, 3.0)
    _run([(_feedback_stream, base + 10 + k) for k in range(6)]
         + [(_editor, base + 20 + k) for k in range(2)], server.url, ledger, seconds,
         kill=kill or server.kill)
    return seconds


#: With Ray, the kills go round: the whole server (its local cluster with it), a Tab
#: replica, the ingress replica (where the event store is written).
RAY_VICTIMS = ("server", "specialist-tab", "ingress")


def _retry_in_flight(server: Server, ledger: Ledger) -> int:
    """After a restart a client sends again what got no answer: stored once either way."""
    items = sorted(ledger.in_flight.items())
    if items:
        with httpx.Client(base_url=server.url, timeout=HANG_S) as client:
            for start in range(0, len(items), 500):
                _feedback_batch(client, items[start:start + 500], ledger)
    return len(items)


def _verify_store(url: str, ledger: Ledger) -> dict[str, Any]:
    from sqlalchemy import func, select

    from specialists.tab.events import EventStore

    store = EventStore(url)
    try:
        a, o = store.actions, store.outcomes
        with store.engine.connect() as conn:
            stored_actions = {r[0] for r in conn.execute(select(a.c.request_id))}
            stored = dict(conn.execute(select(o.c.request_id, o.c.outcome)).all())
            twice = sum(conn.execute(select(func.count()).select_from(
                select(t.c.request_id).group_by(t.c.request_id)
                .having(func.count() > 1).subquery())).scalar() or 0 for t in (a, o))
    finally:
        store.close()
    lost_actions = ledger.actions - stored_actions
    lost_feedback = {rid for rid, outcome in ledger.feedback.items()
                     if stored.get(rid) != outcome}
    return {"acknowledged_actions": len(ledger.actions),
            "acknowledged_feedback": len(ledger.feedback),
            "lost_actions": len(lost_actions), "lost_feedback": len(lost_feedback),
            "lost_examples": sorted(lost_actions | lost_feedback)[:5], "duplicated": twice}


def _resend_all(server: Server, ledger: Ledger) -> dict[str, int]:
    """Every acknowledged feedback once more: each must be a duplicate, none recorded anew."""
    answers: dict[str, int] = {}
    items = sorted(ledger.feedback.items())
    with httpx.Client(base_url=server.url, timeout=HANG_S) as client:
        for start in range(0, len(items), 500):
            chunk = items[start:start + 500]
            r = client.post("/v1/feedback", json={"feedback": [
                {"request_id": rid, "outcome": outcome} for rid, outcome in chunk]})
            for answer in r.json().get("results", []):
                answers[answer["status"]] = answers.get(answer["status"], 0) + 1
    return answers


def section_durability(ctx: "Context") -> dict[str, Any]:
    tmp = ctx.tmp / "durability"
    tmp.mkdir()
    (tmp / "data").mkdir()
    with ctx.events_url("durability") as url:
        config = write_config(tmp, ctx.fake, url, full=False,
                              tab_max_batch=ctx.args.tab_max_batch)
        server = ENGINES[ctx.args.engine](config, free_port(), ctx.tmp / "cwd",
                                          tmp / "server.log", ctx.args.workers)
        ledger = Ledger()
        retried = 0
        rng = random.Random(18)
        server.start()
        kills = 0
        victims: dict[str, int] = {}
        try:
            for round_ in range(ctx.args.kills):
                if ctx.out_of_time("durability"):
                    break
                victim = RAY_VICTIMS[round_ % 3] if ctx.args.engine == "ray" else "server"
                replaced: list[dict[str, Any]] = []
                kill = None if victim == "server" else \
                    (lambda v=victim: replaced.append(kill_replica(server, v)))
                seconds = _kill_round(server, ledger, round_, rng, ctx.args.quick, kill)
                kills += 1
                victims[victim] = victims.get(victim, 0) + 1
                if victim == "server":
                    server.start()
                    took = f"restart took {server.starts[-1]}s"
                else:
                    _wait_ready(server)
                    took = f"replaced in {replaced[0]['replaced_in_s']}s"
                retried += _retry_in_flight(server, ledger)
                log(f"durability: kill {kills} ({victim}), {seconds:.1f}s into the feedback; "
                    f"acknowledged so far {len(ledger.actions)} actions, "
                    f"{len(ledger.feedback)} feedback; {retried} retried after restarts; {took}")
            resent = _resend_all(server, ledger)
        finally:
            server.stop()
        check = _verify_store(server_url_of(config), ledger)
    lost = (check["lost_actions"] + check["lost_feedback"] + resent.get("recorded", 0)
            + ledger.recorded_again)
    return {"kills": kills, "store": "postgresql" if url.startswith("postgresql") else "sqlite",
            "victims": victims,
            "acknowledged": check["acknowledged_actions"] + check["acknowledged_feedback"],
            **check, "acknowledged_lost": lost, "retried_after_restart": retried,
            "resent_answers": resent, "recorded_again": ledger.recorded_again,
            "client_errors": ledger.errors,
            "restart_s": server.starts, "server_log_errors": log_errors(tmp / "server.log")}


def _wait_ready(server: Server, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server at {server.url} was not ready again in {timeout:.0f}s")


def server_url_of(config: Path) -> str:
    data = yaml.safe_load(config.read_text())
    return data["events"]["url"] or f"sqlite:///{Path(data['data_dir']) / 'events.sqlite3'}"


# -- fuzz ------------------------------------------------------------------------------------
def _fuzz_schema(url: str) -> dict[str, Any]:
    """The server's OpenAPI schema: since issue 38 it documents every body (chat's and
    feedback's too, from their request models) and lists the routes as ``model``'s values,
    so it is fuzzed as served. ``benchmarks/api_contract.py`` runs every Schemathesis phase
    and check against it."""
    return httpx.get(f"{url}/openapi.json", timeout=30).json()  # type: ignore[no-any-return]


def _a_fault_answered(body: Any, response: Any) -> bool:
    """A 502/503/504 that is the documented answer, not a defect: an ``upstream_error`` (or
    a ``timeout_error``) on an ``only-…`` route, whose one provider this config makes fail (since the schema lists
    the routes, the fuzzer picks them). Counted apart, as ``fuzz_fault_routes_5xx``."""
    route = body.get("model") or body.get("route") if isinstance(body, dict) else None
    if response.status_code not in (502, 503, 504) or not isinstance(route, str) \
            or not route.startswith("only-"):
        return False
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and error.get("type") in ("upstream_error", "timeout_error")


def section_fuzz(ctx: "Context") -> dict[str, Any]:
    import schemathesis
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings

    _index(ctx.server.url)  # so /v1/retrieve searches rather than answering "index first"
    raw = _fuzz_schema(ctx.server.url)
    schema = schemathesis.openapi.from_dict(raw)
    operations = [r.ok() for r in schema.get_all_operations()]  # type: ignore[union-attr]
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    with_input = [op for op in operations if op.body or any(True for _ in op.iter_parameters())]
    inputs = {id(op) for op in with_input}
    per_run = max(5, -(-ctx.args.fuzz_cases // (max(1, len(with_input)) * len(modes))))
    log(f"fuzz: {len(operations)} operations ({len(with_input)} with input) x {len(modes)} "
        f"modes, up to {per_run} cases each")
    counts: dict[str, Any] = {"cases": 0, "by_status": {}, "server_errors": [], "hangs": [],
                              "by_operation": {}, "fault_routes_5xx": 0}
    import requests

    session = requests.Session()

    def record(op: Any, case: Any) -> None:
        started = time.monotonic()
        try:
            response = case.call(base_url=ctx.server.url, session=session, timeout=HANG_S)
            status = response.status_code
        except requests.Timeout:
            status = 0
            counts["hangs"].append(f"{op.method.upper()} {op.path}: {str(case.body)[:300]}")
        except requests.RequestException as exc:
            status = -1
            counts["server_errors"].append(f"{op.method.upper()} {op.path}: "
                                           f"{type(exc).__name__}: {exc}"[:400])
        counts["cases"] += 1
        key = str(status)
        counts["by_status"][key] = counts["by_status"].get(key, 0) + 1
        name = f"{op.method.upper()} {op.path}"
        counts["by_operation"][name] = counts["by_operation"].get(name, 0) + 1
        if status >= 500 and _a_fault_answered(case.body, response):
            counts["fault_routes_5xx"] += 1  # the provider behind it is made to fail
        elif status >= 500:
            counts["server_errors"].append(
                f"{name} -> {status}: body {str(case.body)[:300]!r} query {case.query!r}; "
                f"answer {response.text[:300]!r} ({time.monotonic() - started:.2f}s)")

    for op in operations:
        for mode in modes if id(op) in inputs else modes[:1]:  # nothing to make invalid
            if ctx.out_of_time("fuzz"):
                break

            @settings(max_examples=per_run, deadline=None, database=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                      verbosity=Verbosity.quiet, print_blob=False)
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                record(op, case)

            try:
                run()
            except Exception as exc:  # a strategy that cannot generate for this mode
                log(f"  {op.method.upper()} {op.path} {mode.value}: skipped ({exc!r:.200})")
    session.close()
    log(f"  {counts['cases']} cases; statuses {counts['by_status']}")
    return {"fuzz_cases": counts["cases"], "fuzz_5xx": len(counts["server_errors"]),
            "fuzz_fault_routes_5xx": counts["fault_routes_5xx"],
            "fuzz_hangs": len(counts["hangs"]), "by_status": counts["by_status"],
            "by_operation": counts["by_operation"],
            "examples": (counts["server_errors"] + counts["hangs"])[:10]}


# -- hostile ---------------------------------------------------------------------------------
HOSTILE_ANSWERS = (
    "```python ../outside/pwned.py\nPWNED = 1\n```\n",
    "```python escape/pwned.py\nPWNED = 1\n```\n",
    "```python link.py\nPWNED = 1\n```\n",
    "```python {outside}/pwned.py\nPWNED = 1\n```\n",
    "../../outside/pwned.py\n<<<<<<< SEARCH\n=======\nPWNED = 1\n>>>>>>> REPLACE\n",
)
"""Frontier answers that name paths outside the repository (``hostile-N`` routes)."""


HANG_UP = b"<hang up>"
"""A body chunk that means: close the connection here, read nothing (a client gone)."""


def raw_http(port: int, data: bytes, timeout: float = HANG_S,
             body_chunks: list[bytes] | None = None) -> tuple[int, bytes]:
    """Send bytes as they are (no client library to tidy them up): (status, body head).
    Status 0: the server closed without answering (or we hung up); -1: no answer in
    ``timeout`` (a hang)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            for chunk in body_chunks or []:
                if chunk == HANG_UP:
                    time.sleep(0.1)
                    return 0, b""
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (413) and closed; read what it said
        received = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                part = sock.recv(65536)
                if not part:
                    break
                received += part
                if b"\r\n\r\n" in received and _complete(received):
                    break
        except socket.timeout:
            return -1, received[:300]
        except ConnectionResetError:
            pass
    if not received.startswith(b"HTTP/"):
        return 0, received[:300]
    return int(received.split(b" ", 2)[1]), received.split(b"\r\n\r\n", 1)[-1][:300]


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return head.lower().find(b"transfer-encoding: chunked") < 0 or body.endswith(b"0\r\n\r\n")


def request_bytes(method: str, path: str, body: bytes | None = None,
                  headers: dict[str, str] | None = None, chunked: bool = False) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if body is not None and not chunked:
        hdrs.setdefault("Content-Length", str(len(body)))
    if chunked:
        hdrs["Transfer-Encoding"] = "chunked"
    lines += [f"{k}: {v}" for k, v in hdrs.items()]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"") if not chunked else head


POSTS = ("/v1/tab", "/v1/apply", "/v1/retrieve", "/v1/index", "/v1/edit", "/v1/feedback",
         "/v1/chat/completions", "/v1/tab/deploy")
VALID = {"/v1/tab": {"file": "def f():\n    ret", "cursor": 2},
         "/v1/apply": {"original": "a = 1\nb = 2\n", "sketch": "a = 1\nb = 3\n", "path": "x.py"},
         "/v1/retrieve": {"query": "merge the sketch", "k": 3, "repo": "proj"},
         "/v1/index": {"path": "proj"},
         "/v1/edit": {"instruction": "rename x", "route": "chat", "texts": {"a.py": "x = 1\n"}},
         "/v1/feedback": {"request_id": "nope", "outcome": "accepted"},
         "/v1/chat/completions": chat_body(),
         "/v1/tab/deploy": {"version": 1}}


def _strings_replaced(value: Any, text: str) -> Any:
    """``value`` with every string (keys included) replaced by ``text``."""
    if isinstance(value, str):
        return text
    if isinstance(value, dict):
        return {_strings_replaced(k, text): _strings_replaced(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_replaced(v, text) for v in value]
    return value


def _values_replaced(value: Any, text: str) -> Any:
    """``value`` with every string value (not the keys) replaced by ``text``."""
    if isinstance(value, str):
        return text
    if isinstance(value, dict):
        return {k: _values_replaced(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_values_replaced(v, text) for v in value]
    return value


def hostile_cases(tmp: Path, limit: int) -> list[tuple[str, bytes, list[bytes] | None]]:
    """(name, request bytes, body chunks sent after the head) for every trick."""
    cases: list[tuple[str, bytes, list[bytes] | None]] = []
    big = b'{"x": "' + b"a" * limit + b'"}'
    for path in POSTS:
        good = json.dumps(VALID[path]).encode()
        cases += [
            (f"{path} oversized", request_bytes("POST", path, big), None),
            (f"{path} oversized chunked", request_bytes("POST", path, chunked=True),
             [f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n"]),
            (f"{path} content-length lies", request_bytes("POST", path, good[:-3],
                                                          {"Content-Length": str(len(good))}),
             None),
            (f"{path} invalid utf-8",
             request_bytes("POST", path, good.replace(b'"', b'"\xff\xfe', 1)), None),
            (f"{path} raw surrogate bytes", request_bytes(
                "POST", path, good.replace(b'"', b'"\xed\xa0\x80', 1)), None),
            (f"{path} lone surrogates", request_bytes(
                "POST", path, json.dumps(_values_replaced(VALID[path], "x\ud800y")).encode()),
             None),
            (f"{path} lone surrogates in keys too", request_bytes(
                "POST", path, json.dumps(_strings_replaced(VALID[path], "x\udfffy")).encode()),
             None),
            (f"{path} raw surrogate bytes in every value", request_bytes(
                "POST", path, json.dumps(_values_replaced(VALID[path], "x\ud800y")).replace(
                    "\\ud800", "\ud800").encode("utf-8", "surrogatepass")), None),
            (f"{path} nul everywhere", request_bytes(
                "POST", path, json.dumps(_strings_replaced(VALID[path], "a\x00b")).encode()),
             None),
            (f"{path} deep nesting", request_bytes("POST", path, b"[" * 100_000 + b"]" * 100_000),
             None),
            (f"{path} deep object", request_bytes(
                "POST", path, b'{"a":' * 5000 + b"1" + b"}" * 5000), None),
            (f"{path} NaN", request_bytes("POST", path, good[:-1] + b', "k": NaN, "cursor": '
                                                                     b'Infinity}'), None),
            (f"{path} huge number", request_bytes(
                "POST", path, good[:-1] + b', "k": ' + b"9" * 5000 + b"}"), None),
            (f"{path} not an object", request_bytes("POST", path, b'[1, "a", null]'), None),
            (f"{path} null", request_bytes("POST", path, b"null"), None),
            (f"{path} empty", request_bytes("POST", path, b""), None),
            (f"{path} text/plain", request_bytes("POST", path, good,
                                                 {"Content-Type": "text/plain"}), None),
            (f"{path} form", request_bytes("POST", path, b"a=1&b=2", {
                "Content-Type": "application/x-www-form-urlencoded"}), None),
            (f"{path} multipart", request_bytes("POST", path, b"--x\r\n\r\n--x--\r\n", {
                "Content-Type": "multipart/form-data; boundary=x"}), None),
            (f"{path} huge header", request_bytes("POST", path, good, {"X-Big": "a" * 200_000}),
             None),
            (f"{path} GET", request_bytes("GET", path), None),
            (f"{path} hang up mid-body", request_bytes("POST", path, good[:5],
                                                       {"Content-Length": str(len(good))}),
             [HANG_UP]),
            (f"{path} hang up before the answer", request_bytes("POST", path, good), [HANG_UP]),
        ]
    stream = json.dumps(chat_body("chat", stream=True)).encode()
    cases.append(("chat stream, hang up after the first bytes",
                  request_bytes("POST", "/v1/chat/completions", stream), [b"", HANG_UP]))
    for target in ("/static/..%2f..%2f..%2fetc%2fpasswd", "/static/%00", "/static/a%00b",
                   "/static/../../router/app.py", "//etc/passwd", "/v1/../v1/models",
                   "/static/%ff%fe", "/static/" + "a/" * 5000, "/v1/tab?" + "a=1&" * 20000,
                   "/%", "/static/%zz", "/v1/models\x00", "/static/vendor/../../app.py"):
        cases.append((f"GET {target[:40]}", request_bytes("GET", target), None))
    cases += _path_tricks(tmp)
    return cases


def _path_tricks(tmp: Path) -> list[tuple[str, bytes, list[bytes] | None]]:
    outside = str(tmp / "outside")
    bodies: list[tuple[str, str, dict[str, Any]]] = []
    for p in ("..", "../outside", outside, "escape-root", "proj/escape", "/", "~", "proj/..",
              "proj/link.py", "proj/./../../outside", "\\..\\outside", "proj\x00", "//proj",
              "~no-such-user-of-complement/proj", "proj/" + "n" * 300, "n/" * 3000):
        bodies.append((f"index {p!r}", "/v1/index", {"path": p}))
        bodies.append((f"retrieve repo {p!r}", "/v1/retrieve", {"query": "x", "repo": p}))
        bodies.append((f"edit repo {p!r}", "/v1/edit",
                       {"instruction": "x", "route": "chat", "repo": p, "files": ["a.py"],
                        "write": True}))
    for f in ("../../outside/secret.py", f"{outside}/secret.py", "link.py", "escape/secret.py",
              "escape/new.py", "~/x.py", "C:\\x.py", "a/../../x.py", ".", ""):
        bodies.append((f"edit file {f!r}", "/v1/edit",
                       {"instruction": "x", "route": "chat", "repo": "proj", "files": [f]}))
        bodies.append((f"edit text {f!r}", "/v1/edit",
                       {"instruction": "x", "route": "chat", "repo": "proj", "write": True,
                        "texts": {f: "PWNED = 1\n"}}))
        bodies.append((f"apply path {f!r}", "/v1/apply",
                       {"original": "a = 1\n", "sketch": "a = 2\n", "path": f}))
    for i in range(len(HOSTILE_ANSWERS)):
        bodies.append((f"edit answer names outside {i}", "/v1/edit",
                       {"instruction": "x", "route": f"hostile-{i}", "repo": "proj",
                        "files": ["diff.py"], "write": True, "strategy": "whole_file"}))
        bodies.append((f"edit answer names outside {i} (search/replace)", "/v1/edit",
                       {"instruction": "x", "route": f"hostile-{i}", "repo": "proj",
                        "files": ["diff.py"], "write": True, "strategy": "search_replace"}))
    return [(name, request_bytes("POST", path, json.dumps(body).encode()), None)
            for name, path, body in bodies]


def expected_statuses(name: str) -> tuple[int, ...] | None:
    """The statuses a case must get, where one answer is right (else: anything but a 5xx)."""
    if name.endswith("oversized") or name.endswith("oversized chunked"):
        return (413,)
    if name.endswith("content-length lies"):
        return (408,)
    if name.startswith(("index ", "retrieve repo ", "edit repo ", "edit file ", "edit text ")):
        return (400, 403, 404)  # refused, whatever the trick
    return None


def snapshot(tmp: Path) -> dict[str, str]:
    """Every file outside the allowed root and the data directory, with its digest; and
    what the allowed root's symlinks point at."""
    seen: dict[str, str] = {}
    skip = {tmp / "repos", tmp / "data", tmp / "durability"}
    for path in sorted(tmp.rglob("*")):
        if any(s == path or s in path.parents for s in skip) or path.suffix == ".log":
            continue
        if path.is_file() and not path.is_symlink():
            seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[str(path)] = "dir" if path.is_dir() else "other"
    # Above the run's folder only the names the cases could write are watched: other
    # programs (a CI run's tests) create files in a shared /tmp all the time.
    for parent in (tmp.parent,):
        names = sorted(n for n in os.listdir(parent) if n in _CASE_NAMES)
        seen[f"case names in {parent}"] = ",".join(names)
    return seen


#: File and folder names the hostile cases try to write outside the allowed root.
_CASE_NAMES = frozenset({"outside", "pwned.py", "secret.py", "new.py", "x.py"})


def section_hostile(ctx: "Context") -> dict[str, Any]:
    limit = ctx.max_body_bytes
    cases = hostile_cases(ctx.tmp, limit)
    before = snapshot(ctx.tmp)
    log(f"hostile: {len(cases)} requests")
    results: dict[str, Any] = {"by_status": {}, "server_errors": [], "hangs": [],
                               "unexpected": []}

    def one(case: tuple[str, bytes, list[bytes] | None]) -> tuple[str, int, bytes]:
        name, data, chunks = case
        status, body = raw_http(ctx.server.port, data, body_chunks=chunks)
        return name, status, body

    with cf.ThreadPoolExecutor(max_workers=8) as pool:
        for name, status, body in pool.map(one, cases):
            results["by_status"][str(status)] = results["by_status"].get(str(status), 0) + 1
            if status >= 500:
                results["server_errors"].append(f"{name} -> {status}: {body[:200]!r}")
            elif status == -1:
                results["hangs"].append(name)
            elif status not in (expected_statuses(name) or (status,)):
                results["unexpected"].append(f"{name} -> {status}: {body[:200]!r}")
    alive = httpx.get(f"{ctx.server.url}/healthz", timeout=10).status_code == 200
    time.sleep(0.5)  # let the server finish logging what the hang-ups did
    after = snapshot(ctx.tmp)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    for line in results["server_errors"] + results["hangs"] + results["unexpected"]:
        log(f"  BAD {line}")
    return {"hostile_cases": len(cases), "hostile_5xx": len(results["server_errors"]),
            "hostile_hangs": len(results["hangs"]),
            "hostile_unexpected": len(results["unexpected"]), "written_outside": len(changed),
            "written_examples": changed[:5], "server_alive_after": alive,
            "by_status": results["by_status"],
            "examples": (results["server_errors"] + results["hangs"]
                         + results["unexpected"])[:10]}


# -- wiring ----------------------------------------------------------------------------------
@dataclass
class Context:
    args: argparse.Namespace
    tmp: Path
    fake: str
    server: Server
    deadlines: dict[str, float] = field(default_factory=dict)
    max_body_bytes: int = 4 * 1024 * 1024

    def out_of_time(self, section: str) -> bool:
        late = time.monotonic() > self.deadlines.get(section, float("inf"))
        if late:
            log(f"{section}: out of its time budget; stopping it here")
        return late

    @contextmanager
    def events_url(self, purpose: str) -> Iterator[str]:
        """'' (SQLite under the data directory), or a fresh PostgreSQL database."""
        if not self.args.events_url:
            yield ""
            return
        from sqlalchemy import create_engine, text

        name = f"complement_{purpose}_{uuid.uuid4().hex[:8]}"
        admin = create_engine(self.args.events_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield f"{self.args.events_url.rpartition('/')[0]}/{name}"
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


def section_security(ctx: "Context") -> dict[str, Any]:
    """Issue 41's probes; each starts its own server (in this process) for its config."""
    from router.audit import PROBES, run_all, summary

    tallies = run_all(ctx.args.findings or None, progress=log)
    return {"findings": sorted(ctx.args.findings or PROBES), **summary(tallies)}


BUDGETS_S = {"load": 600, "faults": 300, "durability": 600, "fuzz": 900, "hostile": 300,
             "security": 600}
QUICK_BUDGETS_S = {"load": 60, "faults": 120, "durability": 240, "fuzz": 60, "hostile": 120,
                   "security": 600}
"""Generous: a smoke run on a busy machine (server starts of 20 s) should still finish."""


def run_sections(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    make_tree(tmp)
    summary: dict[str, Any] = {"sections": {}}
    budgets = QUICK_BUDGETS_S if args.quick else BUDGETS_S
    with fake_provider(tmp) as fake:
        # The main server's event store (SQLite) matters to no section; durability has its own.
        config = write_config(tmp, fake, "", tab_max_batch=args.tab_max_batch)
        server = ENGINES[args.engine](config, free_port(), tmp / "cwd", tmp / "server.log",
                                      args.workers)
        ctx = Context(args, tmp, fake, server)
        if any(s not in ("durability", "security") for s in args.only):
            log(f"starting the server ({args.engine}, {args.workers} worker(s))")
            summary["server_start_s"] = round(server.start(), 2)
        try:
            for section in args.only:
                started = time.monotonic()
                ctx.deadlines[section] = started + budgets[section]
                summary[section] = SECTION_FUNCTIONS[section](ctx)
                took = round(time.monotonic() - started, 1)
                summary["sections"][section] = {"seconds": took, "budget_s": budgets[section]}
                log(f"{section}: done in {took}s")
        finally:
            server.stop()
        summary["server_log_errors"] = log_errors(server.log_path)
    return summary


def log_errors(path: Path) -> list[str]:
    """The server's logged failures: tracebacks, unhandled errors (each a 500 or a crash
    that a client may never have seen)."""
    if not path.exists():
        return []
    lines = path.read_text(errors="replace").splitlines()
    return [line[:300] for line in lines
            if line.startswith(("Traceback", "ERROR", "unhandled error"))]


SECTION_FUNCTIONS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "load": section_load, "faults": section_faults, "durability": section_durability,
    "fuzz": section_fuzz, "hostile": section_hostile, "security": section_security}


def flatten(summary: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The headline keys at the top, the sections' detail below them."""
    out: dict[str, Any] = {"engine": args.engine, "workers": args.workers, "quick": args.quick,
                           "tab_max_batch": args.tab_max_batch}
    checks: list[bool] = []
    if "faults" in summary:
        f = summary["faults"]
        out.update(faults_total=f["faults_total"], faults_survived=f["faults_survived"])
        checks.append(f["faults_survived"] == f["faults_total"])
        if "replica_kill" in f:
            k = f["replica_kill"]
            out["replica_kill"] = {key: k[key] for key in ("requests", "failed",
                                                            "calls_retried", "replaced_in_s")}
            checks.append(k["failed"] == 0 and k["replaced_in_s"] is not None)
    if "durability" in summary:
        d = summary["durability"]
        out.update(kills=d["kills"], acknowledged=d["acknowledged"],
                   acknowledged_lost=d["acknowledged_lost"], duplicated=d["duplicated"],
                   events_store=d["store"])
        checks.append(d["acknowledged_lost"] == 0 and d["duplicated"] == 0)
    if "fuzz" in summary:
        z = summary["fuzz"]
        out.update(fuzz_cases=z["fuzz_cases"], fuzz_5xx=z["fuzz_5xx"], fuzz_hangs=z["fuzz_hangs"],
                   fuzz_fault_routes_5xx=z["fuzz_fault_routes_5xx"])
        checks.append(z["fuzz_5xx"] == 0 and z["fuzz_hangs"] == 0)
    if "hostile" in summary:
        h = summary["hostile"]
        out.update(hostile_cases=h["hostile_cases"], hostile_5xx=h["hostile_5xx"],
                   hostile_hangs=h["hostile_hangs"], hostile_unexpected=h["hostile_unexpected"],
                   written_outside=h["written_outside"])
        checks.append(h["hostile_5xx"] == 0 and h["hostile_hangs"] == 0
                      and h["hostile_unexpected"] == 0 and h["written_outside"] == 0
                      and h["server_alive_after"])
    if "security" in summary:
        sec = summary["security"]
        out.update(security_attempts=sec["attempts"], security_leaks=sec["leaks"],
                   security_writes_outside=sec["writes_outside"],
                   security_commands_run=sec["commands_run"],
                   security_failures=sec["failures"],
                   security={name: {k: v for k, v in p.items() if k != "name"}
                             for name, p in sec["probes"].items()})
        checks.append(sec["leaks"] == 0 and sec["writes_outside"] == 0
                      and sec["commands_run"] == 0 and sec["failures"] == 0)
    if "load" in summary:  # keyed by server kind: the engine, and its processes if several
        unit = "tab-replicas" if args.engine == "ray" else "workers"
        kind = args.engine if args.workers == 1 else f"{args.engine}-{args.workers}-{unit}"
        out["load"] = {kind: summary["load"]["levels"]}
        out["tab_p99_over_50ms_at"] = {kind: summary["load"]["tab_p99_over_50ms_at"]}
    errors = summary.get("server_log_errors", []) + summary.get("durability", {}).get(
        "server_log_errors", [])
    out["server_log_errors"] = len(errors)
    checks.append(not errors)
    out["ok"] = all(checks)
    out["machine"] = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
                      f"{platform.python_version()}")
    out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    out["detail"] = summary
    return out


def _csv(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(choices)}")
        return names
    return parse


def _findings(text: str) -> list[str]:
    from router.audit import PROBES

    names = [x.strip().upper() for x in text.split(",") if x.strip()]
    unknown = [n for n in names if n not in PROBES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(PROBES)}")
    return names


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give levels like 1,4,16") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: levels are whole numbers >= 1")
    return levels


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--only", type=_csv(SECTIONS), default=list(SECTIONS),
                        help="sections to run, comma-separated (default all: "
                        f"{','.join(SECTIONS)})")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: few levels, short, few cases (CI runs this)")
    parser.add_argument("--engine", choices=sorted(ENGINES), default="single",
                        help="how the server runs (default single: complement serve)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (single) or Tab replicas (ray)")
    parser.add_argument("--levels", type=_levels, help="load: concurrency levels "
                        "(default 1,2,4,8,16,32,64; quick 1,8)")
    parser.add_argument("--seconds", type=float, help="load: seconds per level (default 5; "
                        "quick 1)")
    parser.add_argument("--tab-max-batch", type=int, metavar="N",
                        help="Tab's max_batch option (default: the specialist's; 1 turns "
                        "batching off)")
    parser.add_argument("--findings", type=_findings, default=[],
                        help="security: the findings to probe, comma-separated (default "
                        "all: the keys of router.audit.PROBES, e.g. F1,F2)")
    parser.add_argument("--kills", type=int, help="durability: SIGKILLs (default 5; quick 3)")
    parser.add_argument("--fuzz-cases", type=int, help="fuzz: cases in all (default 2400; "
                        "quick 150)")
    parser.add_argument("--events-url", default="",
                        help="durability: a PostgreSQL server's URL (a database is made "
                        "there for the run and dropped after); default SQLite")
    parser.add_argument("--postgres", action="store_true",
                        help="durability: start a throwaway PostgreSQL (.ci/postgres.sh)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    quick = args.quick
    args.levels = args.levels or ([1, 8] if quick else [1, 2, 4, 8, 16, 32, 64])
    args.seconds = args.seconds or (1.0 if quick else 5.0)
    args.kills = args.kills if args.kills is not None else (3 if quick else 5)
    args.fuzz_cases = args.fuzz_cases or (150 if quick else 2400)
    return args


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL server from ``.ci/postgres.sh`` for the run, stopped and removed after."""
    done = subprocess.run(["bash", str(REPO / ".ci" / "postgres.sh")], capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"PostgreSQL did not start: {done.stderr[-1000:]}")
    url = done.stdout.strip().splitlines()[-1]
    data = next(line.split(":", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("postgres-data-dir:"))
    log(f"PostgreSQL on {url}")
    try:
        yield url
    finally:
        pg_ctl = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1]
        stop = [str(pg_ctl), "-D", f"{data}/data", "stop", "-m", "fast"]
        if os.getuid() == 0:
            stop = ["runuser", "-u", "postgres", "--", *stop]
        subprocess.run(stop, capture_output=True, timeout=120)
        shutil.rmtree(data, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    load_start = [round(x, 2) for x in os.getloadavg()]
    tmp = Path(tempfile.mkdtemp(prefix="complement-reliability-"))
    try:
        if args.postgres and not args.events_url:
            with throwaway_postgres() as args.events_url:
                summary = run_sections(args, tmp)
        else:
            summary = run_sections(args, tmp)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    out = flatten(summary, args)
    out["load_average_start"] = load_start
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
