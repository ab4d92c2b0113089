"""How long a first start takes: `complement serve` on the default config and a fresh data
directory, until /healthz answers and until /readyz says every specialist is ready.

Issue 20's target is ready within 60 s of start on a fresh machine: no specialist may build
a model in the first request window (the default embedder ships with the package,
``retrieval/shipped.py``). Each run starts from an empty data directory and an empty numba
cache (the applier's kernels compile on a first start); the JSON summary is the last line.

    python benchmarks/first_start.py [--runs 3] [--config configs/default.yaml]
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_start(config: str, timeout: float) -> dict[str, float | None]:
    import httpx

    port = _port()
    with tempfile.TemporaryDirectory(prefix="complement-first-start-") as data:
        # an empty numba cache too: the applier's kernels compile as on a fresh install
        env = {**os.environ, "COMPLEMENT_DATA_DIR": data, "PYTHONPATH": str(ROOT),
               "NUMBA_CACHE_DIR": os.path.join(data, "numba-cache")}
        env.pop("COMPLEMENT_EMBEDDER", None)  # the default embedder, as a user gets it
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--config",
                                 config, "--port", str(port), "--log-level", "warning"],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        healthy = ready = None
        try:
            while time.monotonic() - t0 < timeout and proc.poll() is None:
                try:
                    if healthy is None and httpx.get(f"http://127.0.0.1:{port}/healthz",
                                                     timeout=2).status_code == 200:
                        healthy = time.monotonic() - t0
                    if healthy is not None and httpx.get(
                            f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                        ready = time.monotonic() - t0
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"healthy_s": healthy and round(healthy, 2), "ready_s": ready and round(ready, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--config", default=str(ROOT / "configs" / "default.yaml"))
    ap.add_argument("--timeout", type=float, default=600.0)
    a = ap.parse_args()
    runs = []
    for i in range(a.runs):
        runs.append(one_start(a.config, a.timeout))
        print(f"run {i + 1}: healthy {runs[-1]['healthy_s']} s, ready {runs[-1]['ready_s']} s",
              file=sys.stderr)
    ready = [r["ready_s"] for r in runs if r["ready_s"] is not None]
    summary = {"runs": runs, "ready_s_median": statistics.median(ready) if ready else None,
               "ready_s_max": max(ready) if ready else None,
               "all_ready_within_60_s": len(ready) == len(runs) and max(ready) <= 60,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"Python {platform.python_version()}"}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
