"""``complement serve`` and ``complement doctor`` as a person runs them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COMPLEMENT_API_KEY")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _cli() -> list[str]:
    exe = shutil.which("complement")
    return [exe] if exe else [sys.executable, "-m", "router.cli"]


def test_serve_default_config_answers_healthz_offline(tmp_path: Path) -> None:
    port = free_port()
    # the default config on a fresh data directory, the shipped default embedder included:
    # ready must not wait for any model to be built (issue 20: within 60 s)
    env = _env() | {"COMPLEMENT_DATA_DIR": str(tmp_path)}
    env.pop("COMPLEMENT_EMBEDDER", None)
    env.pop("COMPLEMENT_HOME", None)
    proc = subprocess.Popen([*_cli(), "serve", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120  # benchmarks/first_start.py measures it
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.3)
        assert r.json() == {"status": "ok"}
        base = f"http://127.0.0.1:{port}"
        while (ready := httpx.get(f"{base}/readyz", timeout=30)).status_code != 200:
            assert time.monotonic() < deadline, ready.text  # 503 while a specialist loads
            time.sleep(0.5)
        assert set(ready.json()["specialists"]) == {"tab", "apply", "retrieval"}
        assert ready.json()["specialists"]["retrieval"]["embedder"] == "static"
        # every local specialist works with no key
        text = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
        typing = text + "\n\ndef mul(a, b):\n    ret"
        tab = httpx.post(f"{base}/v1/tab", json={"file": typing, "cursor": len(typing),
                                                 "language": "python"}, timeout=30)
        assert tab.status_code == 200 and "policy_version" in tab.json()
        sketch = ("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
                  "def mul(a, b):\n    return a * b\n")
        applied = httpx.post(f"{base}/v1/apply", json={"original": text, "sketch": sketch,
                                                       "path": "m.py"}, timeout=30)
        assert applied.status_code == 200, applied.text
        assert "def mul(a, b):" in str(applied.json())
        r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
            "model": "reasoning", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 503
        message = r.json()["error"]["message"]
        assert "ANTHROPIC_API_KEY" in message and "OPENAI_API_KEY" in message
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_doctor_says_why_routes_are_not_live() -> None:
    proc = subprocess.run([*_cli(), "doctor", "--skip-load"], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "reasoning" in proc.stdout
    assert "NOT LIVE" in proc.stdout and "set ANTHROPIC_API_KEY" in proc.stdout


def test_help_lists_commands() -> None:
    proc = subprocess.run([*_cli(), "--help"], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    for word in ("serve", "config", "doctor"):
        assert word in proc.stdout


def test_subcommand_help_says_what_that_subcommand_does() -> None:
    """Issue 40: ``eval compare --help`` repeated ``eval --help``; ``tab train --help``
    named only REINFORCE, while its ``--from-events`` step is a PPO-clip update."""
    def help_of(*args: str) -> str:
        proc = subprocess.run([*_cli(), *args, "--help"], cwd=REPO, env=_env(),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    compare, evaluate = help_of("eval", "compare"), help_of("eval")
    assert compare.startswith("usage: complement eval compare RUN1 RUN2")
    assert "exact-match outcome flipped" in compare and "--routes" not in compare
    assert "--routes" in evaluate and compare != evaluate
    train = " ".join(help_of("tab", "train").split())
    assert "REINFORCE" in train and "PPO-clip" in train


def test_a_path_that_cannot_be_used_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    for path, code, says in (("~no-such-user-of-complement/x", 2, "no user of this machine"),
                             (str(tmp_path / ("a" * 300)), 1, "File name too long")):
        proc = subprocess.run([*_cli(), "index", path], cwd=REPO, env=_env(),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == code, proc.stderr
        assert says in proc.stderr and "Traceback" not in proc.stderr
