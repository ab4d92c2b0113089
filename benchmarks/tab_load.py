"""Tab under concurrency: simulated editors typing against ``complement serve``, through HTTP.

    python benchmarks/tab_load.py ../shared/data/commits [--editors 1,4,16] [--seconds 30]

Starts ``complement serve`` in a subprocess (the default config: the shipped Tab
checkpoint, sampling and feature logging on as shipped, a fresh temporary data directory
so the event store starts empty), then, in this process, runs N editors at once for each N
of ``--editors``, each for ``--seconds``. ``--url`` (with ``--pid``) measures a server
already running; ``COMPLEMENT_TAB_PROCESSES=0`` serves the model from a thread instead of
the default config's two processes.

Each editor replays held-out edits (the test split of the histories folder given as the
argument, real file states) as a person types them:

* per hunk: a pause while the cursor moves there (``--pause-ms``, default 600–1500 ms),
  one keystroke that deletes what goes (if anything), then the new text one character
  at a time, with inter-key times drawn uniformly from ``--key-ms`` (default 120–200 ms,
  about 60–100 words a minute while typing);
* every keystroke asks for a suggestion after a debounce (``--debounce-ms``, default
  50–75 ms, drawn per keystroke): a keystroke that comes within the debounce replaces the
  earlier one's request before it is made;
* at most one request in flight per editor: a request that becomes ready while one is in
  flight waits, and a newer one replaces it (client-side stale drop, counted ``dropped``);
  if the one in flight is older than ``--abandon-ms`` (default 150 ms) the editor stops
  waiting for it and sends the new one at once — its higher ``seq`` in the same
  ``session`` makes the server cancel the old one if it has not run yet (``cancelled``);
* the editor never accepts a suggestion (it types the real change), so each answer's
  ``last_outcome`` is ``rejected`` when something was shown, else ``none``.

Each editor is its own HTTP client with its own ``session``. Latency is measured here,
from sending the request to reading its answer. The p50/p95/p99
and the share answered within 50 ms count every sent request; one that got no real
decision in time (abandoned, cancelled, ``overloaded``, an error) counts as a miss
(infinitely late). The single-editor run is the same-run baseline: the JSON summary (last
line) gives each N's p99 against the one-editor p50. On a shared machine, ``other_cores``
says how much CPU everything but the server and this client used during each run; a run
where it passes ``QUIET_CORES`` is flagged (``tab_quiet_eN`` false, a note on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MISS = math.inf

#: ``other_cores`` at most this: a run no other job disturbed (BENCHMARKS.md's "quiet" runs;
#: ``tab_quiet_eN`` in the summary). The tail moves with other jobs' load on these 2 cores.
QUIET_CORES = 0.05


@dataclass(frozen=True)
class Typing:
    """The simulated person's clock, in milliseconds (ranges are drawn uniformly)."""

    key_ms: tuple[float, float] = (120, 200)
    debounce_ms: tuple[float, float] = (50, 75)
    pause_ms: tuple[float, float] = (600, 1500)
    abandon_ms: float = 150


def keystrokes(pair: Any, rng: random.Random, typing: Typing, max_recent: int = 5
               ) -> Iterator[tuple[float, dict[str, Any]]]:
    """(seconds after the previous keystroke, the request body for the state it leaves)
    for one replayed edit, hunk by hunk, a character at a time."""
    from specialists.tab.hunks import hunks_of

    file, recent = pair.before, list[dict[str, Any]]()
    for h in hunks_of(pair.before, pair.after):
        first = _body(pair, file, h.start, recent, max_recent)
        first["_meta"]["kind"] = "cold"  # the cursor jumped here: a prompt not seen before
        yield rng.uniform(*typing.pause_ms) / 1000, first
        if h.old:  # one keystroke deletes what goes
            file = file[: h.start] + file[h.start + len(h.old) :]
            now = recent + [{"old": h.old, "new": "", "offset": h.start}]
            yield rng.uniform(*typing.key_ms) / 1000, _body(pair, file, h.start, now, max_recent)
        for k, ch in enumerate(h.new):
            file = file[: h.start + k] + ch + file[h.start + k :]
            now = recent + [{"old": h.old, "new": h.new[: k + 1], "offset": h.start}]
            yield rng.uniform(*typing.key_ms) / 1000, _body(pair, file, h.start + k + 1, now, max_recent)
        recent = (recent + [{"old": h.old, "new": h.new, "offset": h.start}])[-max_recent:]


def _body(pair: Any, file: str, cursor: int, edits: list[dict[str, Any]], max_recent: int
          ) -> dict[str, Any]:
    """A request body; ``_meta`` (not sent) says what the report groups it by."""
    return {"file": file, "cursor": cursor, "language": pair.language, "path": pair.path,
            "recent_edits": edits[-max_recent:],
            "_meta": {"project": pair.repo, "lines": file.count("\n") + 1, "kind": "warm"}}


BUCKETS = ((200, "<200"), (1_000, "200-1000"), (5_000, "1000-5000"), (math.inf, ">=5000"))
"""File sizes in lines, as the report groups requests."""


def bucket(lines: int) -> str:
    return next(name for bound, name in BUCKETS if lines < bound)


@dataclass
class Stats:
    keystrokes: int = 0
    debounced: int = 0
    dropped: int = 0
    """Ready requests replaced by a newer one before they were sent (client-side stale drop)."""
    sent: int = 0
    abandoned: int = 0
    cancelled: int = 0
    overloaded: int = 0
    errors: int = 0
    shown: int = 0
    latencies: list[float] = field(default_factory=list)
    """Milliseconds per sent request; ``MISS`` for one without a real decision in time."""
    error_kinds: Counter[str] = field(default_factory=Counter)
    trace: list[dict[str, Any]] = field(default_factory=list)
    """One row per answered request (``--trace``): when, whose, client and server latency."""
    groups: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    """(project, size bucket, cold or warm) -> latencies, as ``latencies``."""

    def add(self, meta: dict[str, Any], ms: float) -> None:
        key = (meta["project"], bucket(meta["lines"]), meta["kind"])
        self.groups.setdefault(key, []).append(ms)


RUN_ID = os.urandom(4).hex()
"""In every request id and session: a second run against the same ``--url`` reuses none
(the server answers 409 to a request id it has seen)."""


class Editor:
    """One person typing in one document: a session with its own ``seq``."""

    def __init__(self, name: str, pairs: list[Any], typing: Typing, seed: int,
                 http: Any, url: str, stats: Stats) -> None:
        self.name, self.pairs, self.typing = name, pairs, typing
        self.rng = random.Random(seed)
        self.http, self.url, self.stats = http, url, stats
        self.seq = 0
        self.current: asyncio.Task | None = None  # the request the editor is waiting for
        self.sent_at = 0.0
        self.pending: dict[str, Any] | None = None
        self.last_outcome: str | None = None
        self.last_answer: float | None = None
        self.background: set[asyncio.Task] = set()

    async def run(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self.rng.uniform(0, 1))  # editors do not start in step
        t = loop.time()
        for pair in self._pairs_forever():
            strokes = keystrokes(pair, self.rng, self.typing)
            nxt = next(strokes, None)
            while nxt is not None:
                dt, body = nxt
                t += dt
                if t >= until:
                    return
                self.stats.keystrokes += 1
                nxt = next(strokes, None)
                debounce = self.rng.uniform(*self.typing.debounce_ms) / 1000
                if nxt is not None and nxt[0] < debounce:
                    self.stats.debounced += 1  # typed on before the debounce fired
                    continue
                await asyncio.sleep(max(0.0, t + debounce - loop.time()))
                self._ready(body)

    def _pairs_forever(self) -> Iterator[Any]:
        while True:
            yield from self.pairs

    def _ready(self, body: dict[str, Any]) -> None:
        self.seq += 1
        body = {**body, "session": f"{RUN_ID}:{self.name}", "seq": self.seq,
                "request_id": f"{RUN_ID}:{self.name}:{self.seq}"}
        busy = self.current is not None and not self.current.done()
        if busy and (time.perf_counter() - self.sent_at) * 1000 < self.typing.abandon_ms:
            if self.pending is not None:
                self.stats.dropped += 1
            self.pending = body
            return
        if busy:  # stop waiting; the server cancels it by seq if it has not run yet
            self.stats.abandoned += 1
            self.background.add(self.current)  # type: ignore[arg-type]
            self.current.add_done_callback(self.background.discard)  # type: ignore[union-attr]
        if self.pending is not None:
            self.stats.dropped += 1
            self.pending = None
        self._send(body)

    def _send(self, body: dict[str, Any]) -> None:
        body = dict(body)
        meta = body.pop("_meta")
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.last_answer is not None:
            body["seconds_since_last"] = round(now - self.last_answer, 3)
            body["last_outcome"] = self.last_outcome
        self.sent_at = time.perf_counter()
        self.stats.sent += 1
        self.current = asyncio.ensure_future(self._post(body, self.sent_at, meta))

    async def _post(self, body: dict[str, Any], sent_at: float, meta: dict[str, Any]) -> None:
        task = asyncio.current_task()
        try:
            async with self.http.post(self.url, json=body) as r:
                answer = await r.json() if r.status == 200 else None
                if answer is None:
                    self.stats.error_kinds[f"HTTP {r.status}: {(await r.text())[:120]}"] += 1
        except Exception as exc:  # a failed request is a counted miss, not a crash
            answer = None
            self.stats.error_kinds[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
        ms = (time.perf_counter() - sent_at) * 1000
        abandoned = task is not self.current
        self._record(answer, ms, abandoned, meta)
        if abandoned:
            return
        self.last_answer = asyncio.get_running_loop().time()
        if answer is not None and not answer.get("cancelled"):
            self.last_outcome = "rejected" if answer.get("suggestion") else "none"
        if self.pending is not None:
            body, self.pending = self.pending, None
            self._send(body)

    def _record(self, answer: dict[str, Any] | None, ms: float, abandoned: bool,
                meta: dict[str, Any]) -> None:
        s = self.stats
        if answer is None:
            s.errors += 1
        elif answer.get("cancelled"):
            s.cancelled += 1
        elif "overloaded" in str(answer.get("reason") or ""):
            s.overloaded += 1
        elif answer.get("suggestion"):
            s.shown += 1
        ok = answer is not None and not answer.get("cancelled") and \
            "overloaded" not in str(answer.get("reason") or "")
        s.latencies.append(ms if ok and not abandoned else MISS)
        s.add(meta, s.latencies[-1])
        s.trace.append({"t": round(time.monotonic(), 4), "editor": self.name, "ms": round(ms, 2),
                        "server_ms": (answer or {}).get("latency_ms"), "abandoned": abandoned,
                        "reason": (answer or {}).get("reason")})

    async def drain(self) -> None:
        waiting = [t for t in (self.current, *self.background) if t is not None]
        if waiting:
            await asyncio.wait(waiting, timeout=30)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_editors(url: str, pairs: list[Any], n: int, seconds: float, typing: Typing,
                      seed: int) -> Stats:
    import aiohttp

    stats = Stats()
    async with AsyncExitStack() as stack:  # one HTTP client (keep-alive connection) per editor
        clients = [await stack.enter_async_context(aiohttp.ClientSession()) for _ in range(n)]
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        editors = [Editor(f"e{n}-{i}", pairs[i::n], typing, seed * 1000 + i, clients[i],
                          url + "/v1/tab", stats) for i in range(n)]
        await asyncio.gather(*(e.run(until) for e in editors))
        await asyncio.gather(*(e.drain() for e in editors))
    for kind, count in stats.error_kinds.most_common(5):
        print(f"  {count} x {kind}", file=sys.stderr)
    return stats


def opens(url: str, pairs: list[Any], per_project: int, seed: int) -> Stats:
    """Files just opened: per project, ``per_project`` requests one at a time, each with no
    session, at a random place of a random file (its ``after`` state) taken from each size
    bucket in turn, so no cache of the server's holds its prompt (a jump, a paste, a file
    opened). Latency from sending to reading the answer, on one kept-alive connection."""
    import httpx

    rng = random.Random(seed)
    stats = Stats()
    by_project: dict[str, dict[str, list[Any]]] = {}
    for pair in pairs:
        sized = by_project.setdefault(pair.repo, {})
        sized.setdefault(bucket(pair.after.count("\n") + 1), []).append(pair)
    with httpx.Client(timeout=30) as client:
        for project, sized in sorted(by_project.items()):
            names = sorted(sized)
            for i in range(per_project):
                pair = rng.choice(sized[names[i % len(names)]])
                body = _body(pair, pair.after, rng.randrange(len(pair.after) + 1), [], 0)
                meta = body.pop("_meta")
                meta["kind"] = "open"
                body["request_id"] = f"{RUN_ID}:open:{project}:{i}"
                t0 = time.perf_counter()
                try:
                    r = client.post(url + "/v1/tab", json=body)
                    answer = r.json() if r.status_code == 200 else None
                except (httpx.HTTPError, ValueError) as exc:
                    answer = None
                    stats.error_kinds[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
                ms = (time.perf_counter() - t0) * 1000
                stats.sent += 1
                stats.latencies.append(ms if answer is not None else MISS)
                stats.errors += answer is None
                stats.add(meta, stats.latencies[-1])
    return stats


def group_rows(stats: Stats) -> list[dict[str, Any]]:
    """One row per (project, size bucket, kind), and per (all projects, bucket, kind)."""
    merged: dict[tuple[str, str, str], list[float]] = {}
    for (project, size, kind), values in stats.groups.items():
        merged.setdefault((project, size, kind), []).extend(values)
        merged.setdefault(("all", size, kind), []).extend(values)
    order = {name: i for i, (_, name) in enumerate(BUCKETS)}
    rows = []
    for (project, size, kind), lat in sorted(merged.items(), key=lambda kv: (
            kv[0][0] != "all", kv[0][0], kv[0][2], order[kv[0][1]])):
        rows.append({"project": project, "bucket": size, "kind": kind, "n": len(lat),
                     "p50_ms": _r2(pct(lat, 0.5)), "p99_ms": _r2(pct(lat, 0.99)),
                     "within_50ms": round(sum(1 for x in lat if x <= 50.0) / len(lat), 4)})
    return rows


def _r2(x: float) -> float | None:
    return round(x, 2) if math.isfinite(x) else None  # JSON has no infinity


# -- the server -----------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(config: str, data_dir: str, log: Any, workers: int = 1
                 ) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "COMPLEMENT_DATA_DIR": data_dir, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--config", config,
                             "--port", str(port), "--log-level", "warning", "--workers", str(workers)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"complement serve exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("complement serve was not ready within 300 s")


def tab_health(url: str) -> dict[str, Any]:
    """The Tab specialist's counters from ``/readyz`` (model worker, LM caches), if shown."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
            return dict(json.load(r)["specialists"]["tab"])
    except (OSError, KeyError, ValueError):
        return {}


def worker_figures(before: dict[str, Any], after: dict[str, Any], seconds: float) -> dict[str, Any]:
    """What the model worker did between two ``tab_health`` readings."""
    w0, w1 = before.get("worker") or {}, after.get("worker") or {}
    c0, c1 = before.get("lm_cache") or {}, after.get("lm_cache") or {}
    batches = w1.get("batches", 0) - w0.get("batches", 0)
    jobs = w1.get("jobs", 0) - w0.get("jobs", 0)
    hits = c1.get("prompts_hits", 0) - c0.get("prompts_hits", 0)
    looked = hits + c1.get("prompts_misses", 0) - c0.get("prompts_misses", 0)
    return {"worker_busy": round((w1.get("busy_s", 0) - w0.get("busy_s", 0)) / seconds, 3) if w1 else None,
            "worker_cpu": round((w1.get("cpu_s", 0) - w0.get("cpu_s", 0)) / seconds, 3) if w1 else None,
            "mean_batch": round(jobs / batches, 2) if batches else None,
            "prompt_cache_hits": round(hits / looked, 3) if looked else None}


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants (Linux /proc): the
    server, or with ``--workers N`` uvicorn's supervisor and its worker processes."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, fields in stats.items():
            if int(fields[1]) == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    if pid not in stats:
        return float("nan")
    return sum(int(stats[p][11]) + int(stats[p][12]) for p in tree if p in stats) / tick


# -- the report -----------------------------------------------------------------------
def summarise(n: int, stats: Stats, seconds: float, server_cpu: float, client_cpu: float
              ) -> dict[str, Any]:
    lat = stats.latencies
    served = [x for x in lat if x != MISS]
    within = sum(1 for x in served if x <= 50.0)

    r2 = _r2
    return {"editors": n, "keystrokes": stats.keystrokes, "sent": stats.sent,
            "answered": len(served), "dropped": stats.dropped, "debounced": stats.debounced,
            "abandoned": stats.abandoned, "cancelled": stats.cancelled,
            "overloaded": stats.overloaded, "errors": stats.errors, "shown": stats.shown,
            "p50_ms": r2(pct(lat, 0.5)), "p95_ms": r2(pct(lat, 0.95)), "p99_ms": r2(pct(lat, 0.99)),
            "max_answered_ms": r2(max(served)) if served else None,
            "within_50ms": round(within / len(lat), 4) if lat else None,
            "answered_per_s": round(len(served) / seconds, 1),
            "server_cpu_ms_per_answer": round(server_cpu * 1000 / max(1, len(served)), 2),
            "server_cores": round(server_cpu / seconds, 2),
            "client_cores": round(client_cpu / seconds, 2), "groups": group_rows(stats)}


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["editors", "sent", "answered", "dropped", "abandoned", "cancelled", "overloaded",
            "errors", "p50_ms", "p95_ms", "p99_ms", "within_50ms", "answered_per_s",
            "server_cpu_ms_per_answer", "server_cores", "client_cores", "other_cores",
            "worker_busy", "worker_cpu",
            "mean_batch", "prompt_cache_hits"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join("inf" if r.get(c) is None else str(r[c]) for c in cols) + " |"
              for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="directory of JSONL.gz edit histories (../shared/data/commits)")
    ap.add_argument("--editors", default="1,4,16", help="comma-separated editor counts")
    ap.add_argument("--seconds", type=float, default=30.0, help="typing time per editor count")
    ap.add_argument("--config", default=str(ROOT / "configs" / "default.yaml"))
    ap.add_argument("--url", default=None, help="measure this running server instead")
    ap.add_argument("--pid", type=int, default=None,
                    help="with --url: the server's process id, to measure its CPU")
    ap.add_argument("--server-workers", type=int, default=1,
                    help="complement serve --workers N (processes; each has its own model worker)")
    ap.add_argument("--key-ms", type=float, nargs=2, default=Typing.key_ms, metavar=("LO", "HI"))
    ap.add_argument("--debounce-ms", type=float, nargs=2, default=Typing.debounce_ms,
                    metavar=("LO", "HI"))
    ap.add_argument("--pause-ms", type=float, nargs=2, default=Typing.pause_ms, metavar=("LO", "HI"))
    ap.add_argument("--abandon-ms", type=float, default=Typing.abandon_ms)
    ap.add_argument("--projects", default="test", metavar="PROJECTS",
                    help="histories the editors replay (a split name or comma-separated NAMEs of "
                         "DATA/NAME.jsonl.gz)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opens", type=int, default=40, metavar="N",
                    help="files just opened: N requests per project, one at a time, with no "
                         "session, before the editors type (default 40; 0: none)")
    ap.add_argument("--trace", default=None, help="write every request's timing here (JSON lines)")
    ap.add_argument("--server-log", default=None, help="file for the server's output")
    a = ap.parse_args()

    from specialists.tab.data import load_split

    typing = Typing(tuple(a.key_ms), tuple(a.debounce_ms), tuple(a.pause_ms), a.abandon_ms)
    pairs = load_split(a.data, a.projects)
    random.Random(a.seed).shuffle(pairs)
    counts = [int(x) for x in a.editors.split(",") if x.strip()]
    load_before = [round(x, 2) for x in os.getloadavg()]  # other jobs', before ours starts
    with tempfile.TemporaryDirectory(prefix="tab-load-") as tmp, \
            open(a.server_log or os.path.join(tmp, "server.log"), "w") as log:
        proc, url = (None, a.url.rstrip("/")) if a.url else start_server(a.config, tmp, log, a.server_workers)
        try:
            pid = proc.pid if proc is not None else a.pid
            opened = group_rows(opens(url, pairs, a.opens, a.seed)) if a.opens > 0 else []
            rows = [measure(url, pairs, n, a.seconds, typing, a.seed, pid, a.trace) for n in counts]
            if a.server_workers > 1:  # /readyz answers from one process: its counters are half
                for row in rows:
                    row.update(worker_busy=None, worker_cpu=None, mean_batch=None,
                               prompt_cache_hits=None)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    report(rows, a.seconds, typing, load_before, opened, sorted({p.repo for p in pairs}))
    return 0


def measure(url: str, pairs: list[Any], n: int, seconds: float, typing: Typing, seed: int,
            pid: int | None, trace: str | None = None) -> dict[str, Any]:
    """One editor count: type for ``seconds``, then summarise what the editors saw."""
    cpu0, client0 = cpu_seconds(pid) if pid else float("nan"), time.process_time()
    health0, busy0, t0 = tab_health(url), machine_busy_seconds(), time.monotonic()
    stats = asyncio.run(run_editors(url, pairs, n, seconds, typing, seed))
    cpu1, client1 = cpu_seconds(pid) if pid else float("nan"), time.process_time()
    busy1, t1 = machine_busy_seconds(), time.monotonic()
    row = summarise(n, stats, seconds, cpu1 - cpu0, client1 - client0)
    if trace:
        with open(trace, "a") as fh:
            fh.writelines(json.dumps({"editors": n, **r}) + "\n" for r in stats.trace)
    # what everything else on the machine used meanwhile: other people's jobs (contention)
    row["other_cores"] = round(((busy1 - busy0) - (cpu1 - cpu0) - (client1 - client0)) / (t1 - t0), 2)
    row.update(worker_figures(health0, tab_health(url), seconds))
    row["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(f"{n} editors: {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def group_table(rows: list[dict[str, Any]]) -> str:
    cols = ["project", "bucket", "kind", "n", "p50_ms", "p99_ms", "within_50ms"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join("inf" if r.get(c) is None else str(r[c]) for c in cols) + " |"
              for r in rows]
    return "\n".join(lines)


def report(rows: list[dict[str, Any]], seconds: float, typing: Typing, load_before: list[float],
           opened: list[dict[str, Any]] | None = None, projects: list[str] | None = None
           ) -> None:
    """The tables, then the JSON summary as the last line."""
    machine = f"{platform.machine()}, {os.cpu_count()} cores, no GPU"
    if opened:
        print(f"Files just opened (one request at a time, no session), by file size in lines "
              f"({machine}):")
        print(group_table(opened))
    print(f"Tab under concurrency, {seconds:g} s per editor count, through HTTP ({machine}; "
          f"load average {load_before} before the run):")
    print(table(rows))
    for r in rows:  # cold: the first keystroke where the cursor jumped; warm: typing on
        print(f"{r['editors']} editor(s), by file size in lines: cold = the first keystroke "
              "after the cursor moved, warm = the keystrokes after it")
        print(group_table(r["groups"]))
    summary: dict[str, Any] = {"seconds": seconds, "typing": typing.__dict__,
                               "load_average_before": load_before, "machine": machine,
                               "projects": projects or []}
    for g in opened or []:
        if g["project"] == "all":
            summary[f"open_p99_ms_{g['bucket']}"] = g["p99_ms"]
            summary[f"open_within_50ms_{g['bucket']}"] = g["within_50ms"]
    base = rows[0]["p50_ms"] if rows and rows[0]["editors"] == 1 else None
    for r in rows:
        n = r["editors"]
        for key in ("p50_ms", "p95_ms", "p99_ms", "within_50ms", "sent", "answered", "dropped",
                    "abandoned", "cancelled", "overloaded", "answered_per_s", "worker_busy",
                    "mean_batch", "other_cores", "load_average"):
            summary[f"tab_{key}_e{n}"] = r.get(key)
        for g in r["groups"]:
            if g["project"] == "all":
                summary[f"tab_{g['kind']}_p99_ms_{g['bucket']}_e{n}"] = g["p99_ms"]
                summary[f"tab_{g['kind']}_within_50ms_{g['bucket']}_e{n}"] = g["within_50ms"]
        if base and r["p99_ms"] is not None:  # the same-run baseline: one editor's median
            summary[f"tab_p99_over_e1_p50_e{n}"] = round(r["p99_ms"] / base, 2)
        other = r.get("other_cores")
        summary[f"tab_quiet_e{n}"] = other is not None and other <= QUIET_CORES
        if other is not None and other > QUIET_CORES:
            print(f"note: other jobs used {other} cores during the {n}-editor run (quiet: at most "
                  f"{QUIET_CORES}); its tail latency is not comparable with a quiet run's — "
                  f"run it again when the machine is idle", file=sys.stderr)
    print(json.dumps(summary))

if __name__ == "__main__":
    sys.exit(main())
