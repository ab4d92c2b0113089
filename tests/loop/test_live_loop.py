"""The live loop on the default server: decisions logged by default, feedback that lands,
`complement loop` (not simulated) that trains, gates and hot-swaps the running server,
`loop status` with every version's reward, and `tab rollback` on the live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from router.serving import ServeProcess
from specialists.tab.data import Pair
from specialists.tab.loop.simulate import simulate
from tests.conftest import free_port
from tests.tab.conftest import TOY

REPO = Path(__file__).resolve().parents[2]


def _pairs(copies: int) -> list[Pair]:
    """The toy edits, many times over under different paths: a scripted day of typing."""
    return [Pair(repo="toy", path=f"p{n}_{i}.py", language="python", before=b, after=a,
                 commit=f"{n:020x}{i:020x}")
            for n in range(copies) for i, (b, a) in enumerate(TOY)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    data = tmp_path_factory.mktemp("live-data")
    out = {k: v for k, v in os.environ.items()
           if k not in ("COMPLEMENT_API_KEY", "COMPLEMENT_TAB_COLLECT", "COMPLEMENT_EMBEDDER")}
    # the default config (its shipped embedder included) on a fresh data directory
    out.update(COMPLEMENT_DATA_DIR=str(data), PYTHONPATH=str(REPO))
    return out


@pytest.fixture(scope="module")
def server(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("live-log") / "server.log"
    old = dict(os.environ)
    os.environ.update(env)  # ServeProcess passes os.environ on to `complement serve`
    try:
        srv = ServeProcess(REPO / "configs" / "default.yaml", port, log).start(timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(old)
    try:
        yield srv.url
    finally:
        srv.stop()


def _cli(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "router.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _version(url: str) -> Any:
    r = httpx.post(f"{url}/v1/tab", json={"file": "def add(a, b):\n    return a + ",
                                          "cursor": 29, "language": "python"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["policy_version"]


def test_feedback_lands_on_the_default_config(server: str) -> None:
    r = httpx.post(f"{server}/v1/tab", timeout=60, json={
        "file": "import os\n\n\ndef load(path):\n    with open(path) as fh:\n        return fh.",
        "cursor": 71, "language": "python"})
    body = r.json()
    assert r.status_code == 200 and body["request_id"] and body["logprob"] is not None
    fb = httpx.post(f"{server}/v1/feedback", timeout=30, json={
        "request_id": body["request_id"], "outcome": "accepted"})
    if body["suggestion"] is None:  # nothing shown: nothing to accept, and it says so
        assert fb.status_code == 409 and "showed no suggestion" in fb.text
    else:
        assert fb.status_code == 200 and fb.json()["status"] == "recorded", fb.text
    unknown = httpx.post(f"{server}/v1/feedback", json={"request_id": "nope",
                                                        "outcome": "accepted"})
    assert unknown.status_code == 404 and "request_id that /v1/tab returned" in unknown.text


def test_live_loop_trains_gates_swaps_and_rolls_back(server: str, env: dict[str, str]) -> None:
    first = _version(server)
    stats = simulate(server, _pairs(40), users=2, max_requests=200)
    assert stats.requests >= 200 and not stats.errors, stats.errors[:3]
    assert stats.feedback_sent > 0, "the scripted users accepted or rejected what was shown"

    # one turn: train on the deployed version's events, gate on held-out ones, swap
    done = _cli(env, "loop", "--server", server, "--turns", "1", "--min-events", "150",
                "--canary-share", "0",
                "--wait", "120", "--interval", "0.5", "--gate-margin", "1.0")
    assert done.returncode == 0, done.stderr[-3000:]
    turn = json.loads(done.stdout)["turns"][0]
    assert turn["parent"] == first and turn["shipped"] and turn["events"] > 0
    assert "held-out events" in turn["gate"] and turn["held_out"] > 0
    second = turn["candidate"]
    assert second != first and _version(server) == second, "the running server swapped"

    more = simulate(server, _pairs(3), users=1, max_requests=40)
    assert more.requests >= 40 and not more.errors
    status = _cli(env, "loop", "status")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["deployed"] == second and {first, second} <= set(info["versions"])
    rewards = {int(v["version"]): v["reward_per_request"] for v in info["events_per_version"]}
    assert {first, second} <= set(rewards), info["events_per_version"]
    assert info["last_gate"]["event"] == "gate_passed"
    assert info["last_gate"]["version"] == str(second)
    assert info["live_turns"][-1]["candidate"] == second

    back = _cli(env, "tab", "rollback", str(first), "--server", server)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["deployed"] == first and _version(server) == first
    again = json.loads(_cli(env, "loop", "status").stdout)
    assert again["deployed"] == first


def test_live_loop_waits_and_says_why(server: str, env: dict[str, str]) -> None:
    done = _cli(env, "loop", "--server", server, "--turns", "1", "--min-events", "100000",
                "--wait", "1", "--interval", "0.2")
    assert done.returncode == 0 and json.loads(done.stdout)["turns"] == []
    assert "labelled events; waiting for more" in done.stderr and "gave up" in done.stderr
