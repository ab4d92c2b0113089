"""F2: an empty or wildcard host is off loopback, so a server without keys refuses to bind it.

Before: ``--host ""`` (or ``COMPLEMENT_HOST=`` set empty) counted as loopback; uvicorn bound
0.0.0.0 and [::] and answered without a key. Each attempt starts ``complement serve`` as a
user would; a server that comes up and answers a keyless request is a failure (its port
is asked on loopback only). An empty ``COMPLEMENT_HOST`` in the default config's
``${COMPLEMENT_HOST:-127.0.0.1}`` must now give the default, as in the shell.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from router.audit.common import Tally, free_port

REPO = Path(__file__).resolve().parents[2]
START_S = 60.0

HOSTS = ["", " ", "0.0.0.0", "::", "[::]", "*", "example.invalid"]
"""--host values that are not loopback only; without API keys each must be refused."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPLEMENT_")}
    env.update({"PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "HF_HUB_OFFLINE": "1"}, **extra)
    return env


def start_refused(config: Path, args: list[str], env: dict[str, str], port: int,
                  tally: Tally, what: str) -> None:
    """Run ``complement serve``; it must exit non-zero saying why, never answer keyless."""
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--config",
                             str(config), "--port", str(port), *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tally.attempts += 1
    deadline = time.monotonic() + START_S
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            tally.expect(False, f"{what}: the server started and answered {r.status_code} "
                                "with no key")
            return
        out = proc.stdout.read() if proc.stdout and proc.poll() is not None else ""
        tally.expect(proc.returncode not in (None, 0), f"{what}: did not exit non-zero")
        tally.expect("api" in out.lower() and "key" in out.lower(),
                     f"{what}: the refusal does not say to set a key: {out[-300:]!r}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def probe(tmp: Path) -> Tally:
    from router.config import ConfigError, load_config, parse_config

    tally = Tally("F2 empty host")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({
        "server": {"host": "${COMPLEMENT_HOST:-127.0.0.1}",
                   "api_keys": ["${COMPLEMENT_API_KEY:-}"]},
        "data_dir": str(tmp / "data"), "routes": {}, "specialists": {}}))
    for host in HOSTS:
        start_refused(config, ["--host", host], _env(), free_port(), tally, f"--host {host!r}")
    # the variable set empty means its default, as ${VAR:-default} does in the shell
    tally.attempts += 1
    host = load_config(config, env={"COMPLEMENT_HOST": ""}).server.host
    tally.expect(host == "127.0.0.1", f"COMPLEMENT_HOST='' gave host {host!r}")
    # and through the app factory: an empty host is refused whatever else is set
    for keys in ([], ["k"]):
        tally.attempts += 1
        try:
            parse_config({"server": {"host": "", "api_keys": keys}}, env={})
        except ConfigError:
            continue
        tally.expect(False, f"server.host '' with keys {keys} was accepted")
    return tally
