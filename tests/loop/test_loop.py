"""The online loop's parts against a real server: logging, training, gate, hot swap, faults."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from router.app import create_app
from router.config import parse_config
from router.serving import ServeProcess
from specialists.base import NotFoundError, SpecialistError
from specialists.tab.events import ActionRecord, EventStore, sqlite_url
from specialists.tab.loop.gate import Gate
from specialists.tab.loop.simulate import simulate
from specialists.tab.loop.trainer import train_from_events
from specialists.tab.loop.versions import PolicyStore
from specialists.tab.data import load_split
from tests.conftest import free_port, running

REPO = Path(__file__).resolve().parents[2]


def _state(tmp_path: Path, checkpoint: Path) -> tuple[Path, PolicyStore, int]:
    from specialists.tab.policy import TabPolicy

    store = PolicyStore(tmp_path / "tab")
    version = TabPolicy.load(checkpoint).version
    store.publish(checkpoint, version, {"parent": None, "source": "test"})
    store.set_deployed(version)
    return tmp_path, store, version


def _config(state: Path, checkpoint: Path, store: PolicyStore, **extra: Any) -> dict[str, Any]:
    return {"data_dir": str(state), "events": {"feedback_timeout_s": 120},
            "specialists": {"tab": {"class": "specialists.tab:TabSpecialist", "options": {
                "checkpoint": str(checkpoint), "policy": str(store.path(store.deployed())),
                "sample": True, "log_features": True, "context_tokens": 48}}}, **extra}


@pytest.fixture
def served(tmp_path: Path, tiny_checkpoint: Path) -> Iterator[tuple[str, Any, PolicyStore, int]]:
    state, store, version = _state(tmp_path, tiny_checkpoint)
    app = create_app(parse_config(_config(state, tiny_checkpoint, store), env={}))
    with running(app) as url:
        yield url, app, store, version


def test_policy_store_is_atomic_and_immutable(tmp_path: Path, tiny_checkpoint: Path) -> None:
    store = PolicyStore(tmp_path)
    store.publish(tiny_checkpoint, 7, {"parent": None})
    store.publish(tiny_checkpoint, 7, {"parent": 3})  # same number: unchanged
    assert store.lineage(7)["parent"] is None
    assert store.versions() == [7] and store.deployed() is None
    with pytest.raises(NotFoundError, match="known: \\[7\\]"):
        store.set_deployed(8)
    store.set_deployed(7)
    assert store.deployed() == 7
    assert not [p for p in store.versions_dir.iterdir() if p.name.startswith(".")]


def test_the_small_team_preset_lowers_the_live_loops_thresholds() -> None:
    """Issue 40: a canary decision needed ~2,000 Tab requests; a newcomer made ~400."""
    from router.cli import build_parser
    from router.commands.loop import live_args
    from specialists.tab.loop.live import LiveArgs

    def parsed(*flags: str) -> LiveArgs:
        return live_args(build_parser().parse_args(["loop", *flags]))  # type: ignore[no-any-return]

    default, small = parsed(), parsed("--preset", "small-team")
    assert (default.min_events, default.canary_share, default.canary_min_events) == \
        (LiveArgs.min_events, LiveArgs.canary_share, LiveArgs.canary_min_events)
    # requests before a canary decision: labelled events per arm over the canary's share
    assert small.canary_min_events / small.canary_share <= \
        default.canary_min_events / default.canary_share / 10
    assert small.min_events < default.min_events
    assert parsed("--preset", "small-team", "--canary-min-events", "80").canary_min_events == 80
    assert parsed("--min-events", "7").min_events == 7


def test_status_says_what_became_of_versions_outside_the_lineage(tmp_path: Path,
                                                                 tiny_checkpoint: Path) -> None:
    """Issue 40: ``loop status`` listed the deployed 160 as the lineage while 161 and 162
    existed, and said nothing of them."""
    from specialists.tab.loop.runner import status

    state, store, v = _state(tmp_path, tiny_checkpoint)
    store.publish(tiny_checkpoint, v + 1, {"parent": v})
    store.publish(tiny_checkpoint, v + 2, {"parent": v})
    events = EventStore(sqlite_url(state))
    try:
        events.record_deploy(str(v + 1), "gate_failed", reason="test")
        events.record_deploy(str(v), "turn", turn=0)
        info = status(state, None, events)
    finally:
        events.close()
    assert [c["version"] for c in info["lineage"]] == [v]
    assert info["not_deployed"] == [
        {"version": v + 2, "parent": v, "status": "not deployed"},
        {"version": v + 1, "parent": v, "status": "gate_failed"}]


def test_collect_train_gate_swap(served: tuple[str, Any, PolicyStore, int],
                                 toy_data: Path) -> None:
    url, app, store, v = served
    events: EventStore = app.state.events
    stats = simulate(url, load_split(toy_data, "toy"), users=2, max_requests=60)
    assert not stats.errors, stats.errors[:3]
    assert stats.requests == 60
    counts = events.counts()
    assert counts["actions"] == 60  # every decision logged, with its version
    assert counts["outcomes"] == stats.shown == stats.feedback_sent
    assert stats.versions == {str(v): 60}
    events.record_action(ActionRecord("stale-1", "999", "0", -0.1, False, features={}))

    report = train_from_events(events, store)
    assert report.parent == v and report.version == v + 1
    assert report.events_used == 60 and report.off_policy_refused == 1
    lineage = store.lineage(v + 1)
    assert lineage["parent"] == v and lineage["events_used"] == 60
    assert "code_revision" in lineage and "reward_mean" in lineage

    gate = Gate(load_split(toy_data, "toy")[:2], app.state.registry.get("tab").lm, margin=-5.0)
    held = gate.check(store.path(v + 1), v + 1, store.path(v), v)
    assert not held.passed and "held back" in held.reason  # a failing gate leaves v serving
    assert store.deployed() == v

    deployed = httpx.post(f"{url}/v1/tab/deploy", json={"version": v + 1}, timeout=60).json()
    assert deployed == {"deployed": v + 1, "previous": v, "event": "deploy"}
    assert store.deployed() == v + 1
    text = "def f(x):\n    return x\n\nde"
    answer = httpx.post(f"{url}/v1/tab", json={"file": text, "cursor": len(text),
                                                "language": "python"}).json()
    assert answer["policy_version"] == v + 1
    metrics = httpx.get(f"{url}/metrics").text
    assert f'complement_tab_show_rate{{version="{v}"}}' in metrics
    assert f'complement_tab_reward_per_request{{version="{v}"}}' in metrics
    pending = float(metrics.split("complement_tab_events_pending_feedback ")[-1].split()[0])
    assert pending == app.state.events.pending()
    log = httpx.get(f"{url}/v1/tab/versions").json()
    assert log["deployed"] == v + 1 and log["deploys"][0]["event"] == "deploy"
    # the events of v are now off-policy for v+1: only the request above can be v+1's (it
    # is labelled if v+1 happened to show nothing), never the 60 of v
    own = len(events.labelled(str(v + 1)))
    assert own <= 1
    with pytest.raises(SpecialistError, match=f"only {own} labelled events"):
        train_from_events(events, store, min_events=own + 1)


def test_logged_gate_ships_a_better_candidate_and_holds_back_a_worse_one(
        served: tuple[str, Any, PolicyStore, int], toy_data: Path, tmp_path: Path) -> None:
    """Off-policy evaluation on logged events: users who accept every suggestion make a
    never-show candidate worse than the deployed version, an always-show one better."""
    import torch

    from specialists.tab.loop.gate import LoggedGate
    from specialists.tab.policy import TabPolicy

    url, app, store, v = served
    for pair in load_split(toy_data, "toy"):
        text = pair.after
        for cursor in range(4, len(text), 5):
            answer = httpx.post(f"{url}/v1/tab", timeout=60, json={
                "file": text[:cursor], "cursor": cursor, "language": "python"}).json()
            if answer["suggestion"] is not None:
                httpx.post(f"{url}/v1/feedback", timeout=30, json={
                    "request_id": answer["request_id"], "outcome": "accepted"})
    held = app.state.events.labelled(str(v))
    shown = sum(e.shown for e in held)
    assert 0 < shown < len(held), "the test needs both decisions in the log"

    def candidate(none_bias: float, name: str) -> Path:
        policy = TabPolicy.load(store.path(v))
        with torch.no_grad():
            policy.net.none.bias.fill_(none_bias)
        policy.save(tmp_path / name)
        return tmp_path / name

    gate = LoggedGate(margin=0.005)
    never = gate.check(candidate(50.0, "never"), v + 1, v, held)
    always = gate.check(candidate(-50.0, "always"), v + 2, v, held)
    assert never.reward_deployed == pytest.approx(0.75 * shown / len(held))
    assert not never.passed and never.reward_candidate == pytest.approx(0.0, abs=1e-6)
    # (states with no candidate keep "nothing shown" under any policy, so below 0.75)
    assert always.passed and always.reward_deployed < always.reward_candidate <= 0.75 + 1e-9
    assert "held back" in never.reason and "ships" in always.reason
    too_few = LoggedGate(min_events=len(held) + 1).check(candidate(0.0, "same"), v + 3, v, held)
    assert not too_few.passed and "held-out events" in too_few.reason


def test_swap_under_load_loses_no_request(served: tuple[str, Any, PolicyStore, int],
                                          tmp_path: Path) -> None:
    from specialists.tab.policy import TabPolicy

    url, app, store, v = served
    policy = TabPolicy.load(store.path(v))
    policy.version = v + 5
    policy.save(tmp_path / "next")
    store.publish(tmp_path / "next", v + 5, {"parent": v})
    seen: list[Any] = []
    stop = threading.Event()

    def hammer() -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            while not stop.is_set():
                r = c.post("/v1/tab", json={"file": "x = 1\ny = x\nz", "cursor": 12})
                seen.append((r.status_code, r.json().get("policy_version")))

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    assert httpx.post(f"{url}/v1/tab/deploy", json={"version": v + 5}).status_code == 200
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert seen and all(code == 200 for code, _ in seen)
    assert {ver for _, ver in seen} <= {v, v + 5}
    assert seen[-1][1] == v + 5
    missing = httpx.post(f"{url}/v1/tab/deploy", json={"version": 4242})
    assert missing.status_code == 404 and "known" in missing.json()["error"]["message"]


def test_sigkill_mid_burst_loses_nothing_acknowledged(tmp_path: Path, tiny_checkpoint: Path,
                                                      toy_data: Path) -> None:
    state, store, v = _state(tmp_path, tiny_checkpoint)
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump(_config(state, tiny_checkpoint, store)))
    port = free_port()
    server = ServeProcess(config, port, tmp_path / "server.log").start()
    acked_actions: list[str] = []
    acked_feedback: list[str] = []
    text = "def f(a):\n    return a\n\ndef g(a):\n    return f("
    body = {"file": text, "cursor": len(text), "language": "python"}

    def burst() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            for _ in range(10_000):
                try:
                    r = c.post("/v1/tab", json=body)
                    if r.status_code != 200:
                        continue
                    rid = r.json()["request_id"]
                    acked_actions.append(rid)
                    if r.json()["suggestion"] is not None:
                        f = c.post("/v1/feedback", json={"request_id": rid, "outcome": "rejected"})
                        if f.status_code == 200:
                            acked_feedback.append(rid)
                except httpx.TransportError:
                    return

    threads = [threading.Thread(target=burst) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked_actions) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.stop(kill=True)
    for t in threads:
        t.join(timeout=30)
    assert len(acked_actions) >= 40
    events = EventStore(sqlite_url(state))
    try:
        stored = {e.request_id for e in events.labelled(str(v))}
        pending_or_labelled = events.counts()
        assert pending_or_labelled["actions"] >= len(acked_actions)
        with events.engine.connect() as conn:
            from sqlalchemy import select

            ids = {r[0] for r in conn.execute(select(events.actions.c.request_id))}
            outcome_ids = {r[0] for r in conn.execute(select(events.outcomes.c.request_id))}
        assert set(acked_actions) <= ids
        assert set(acked_feedback) <= outcome_ids
        assert set(acked_feedback) <= stored
    finally:
        events.close()
    server.start()  # restart: it serves again from the same store
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/tab", json=body, timeout=30)
        assert r.status_code == 200 and r.json()["policy_version"] == v
    finally:
        server.stop()


def test_killed_trainer_leaves_deployed_version_serving(tmp_path: Path, tiny_checkpoint: Path,
                                                        toy_data: Path) -> None:
    state, store, v = _state(tmp_path, tiny_checkpoint)
    app = create_app(parse_config(_config(state, tiny_checkpoint, store), env={}))
    with running(app) as url:
        simulate(url, load_split(toy_data, "toy"), users=1, max_requests=30)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(state)}))
    cmd = [sys.executable, "-m", "router.cli", "tab", "train", "--from-events", "--config",
           str(config)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(1.0)  # importing torch: killed before it can publish
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert store.deployed() == v
    assert all((store.path(x) / "lineage.json").exists() for x in store.versions())
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert store.versions() == [v, v + 1] and store.deployed() == v


def test_loop_command_runs_turns_resumes_and_reports(tmp_path: Path, tiny_checkpoint: Path,
                                                     toy_data: Path) -> None:
    import json

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "router.cli", "loop", "--simulate", "--turns", "2",
           "--events-per-turn", "40", "--users", "2", "--data", str(toy_data),
           "--collect-split", "toy", "--gate-split", "toy", "--gate-pairs", "2",
           "--checkpoint", str(tiny_checkpoint), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    log = json.loads((out / "loop.json").read_text())
    assert [t["turn"] for t in log["turns"]] == [0, 1]
    for t in log["turns"]:
        assert t["events"] >= 40 and t["turnaround_s"] > 0
        assert t["extra"]["acknowledged"] == t["extra"]["stored"]  # nothing lost
        assert t["reward"] == "kept"  # the default config's loop.reward (issue 35)
    assert log["turns"][1]["off_policy_refused"] >= (40 if log["turns"][0]["shipped"] else 0)
    assert (out / "loop.png").stat().st_size > 1000
    status = subprocess.run([sys.executable, "-m", "router.cli", "loop", "status", "--simulate",
                             "--out", str(out)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    info = json.loads(status.stdout)
    assert info["deployed"] in info["versions"] and info["lineage"][0]["version"] == info["deployed"]
    assert len(info["last_turns"]) == 2
    # what was kept per 1,000 keystrokes, beside the reward, in what status reports
    assert [t["chars_kept_per_1000"] for t in info["last_turns"]] == \
        [t["chars_kept_per_1000"] for t in log["turns"]]
    missing = subprocess.run([*cmd[:5], "--data", str(tmp_path / "nowhere")], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_simulated_people_drive_the_api(served: tuple[str, Any, PolicyStore, int],
                                        toy_data: Path) -> None:
    """Issue 35: with a world the users are its people; every request they make is logged
    and every suggestion they saw gets feedback; same seed, same people."""
    from specialists.tab.users import World, parse_population

    url, app, store, v = served
    pop = parse_population({"name": "t", "people": [{"type": "noisy", "traits": {
        "noise": {"dismiss": 1.0, "accept_wrong": 1.0, "undo_after": 1},
        "patience": {"rejections": 2, "off_requests": 2}}}]})
    world = World(pop, seed=3, people=2)
    stats = simulate(url, load_split(toy_data, "toy"), users=2, max_requests=40, world=world)
    assert not stats.errors, stats.errors[:3]
    assert stats.requests == 40 and app.state.events.counts()["actions"] == 40
    assert stats.feedback_sent == stats.shown
    assert stats.chars_saved == 0 and stats.accepted >= 1  # wrong ones taken, then undone; right ones dismissed
    if stats.shown >= 2:
        assert stats.switched_off >= 1 and stats.tab_off >= 1
    assert stats.summary()["kept_reward_per_request"] < 0
    assert stats.keystrokes > 0 and stats.summary()["chars_kept_per_1000"] == 0  # nothing right was kept
    # issue 35: each accept's undo and each switch-off reached the store through /v1/feedback
    assert stats.finals_sent == stats.accepted
    labelled = app.state.events.labelled(str(v))
    assert sum(e.undone for e in labelled) == stats.accepted
    assert sum(e.switched_off for e in labelled) == stats.switched_off
    assert all(e.outcome == "rejected" or e.undone for e in labelled if e.shown)


def test_the_loop_learns_from_what_people_kept(served: tuple[str, Any, PolicyStore, int],
                                              toy_data: Path) -> None:
    """Issue 35: people who take wrong suggestions and undo them. The accept key calls
    every accept a win; the kept reward, from the undos the simulator reported over HTTP,
    scores each as a loss, and the trainer learns from that (the config's default)."""
    from specialists.tab.loop.trainer import named_reward
    from specialists.tab.users import KeptReward, World, parse_population

    url, app, store, v = served
    pop = parse_population({"name": "undoers", "people": [{"type": "u", "traits": {
        "noise": {"dismiss": 1.0, "accept_wrong": 1.0, "undo_after": 2}}}]})
    stats = simulate(url, load_split(toy_data, "toy"), users=2, max_requests=30,
                     world=World(pop, seed=0, people=2))
    assert not stats.errors, stats.errors[:3]
    assert stats.accepted > 0  # every wrong suggestion taken ...
    (row,) = app.state.events.version_stats()
    assert row["undone"] == stats.accepted and row["chars_kept"] == 0  # ... and undone
    assert row["reward_per_request"] > 0 > row["kept_reward_per_request"]
    # the simulator's own kept reward and the store's agree: what it reported is what it saw
    assert row["kept_reward_per_request"] == pytest.approx(
        stats.summary()["kept_reward_per_request"], abs=1e-4)
    from router.config import LoopConfig

    assert LoopConfig().reward == "kept"  # the config's default: what was kept
    kept = train_from_events(app.state.events, store, reward=named_reward(LoopConfig().reward))
    assert kept.reward_mean == pytest.approx(row["kept_reward_per_request"])
    assert KeptReward().undo < 0 and kept.reward_mean < 0
    assert row["reward_per_request"] == pytest.approx(
        sum(named_reward("accept")(e.shown, e.outcome == "accepted")
            for e in app.state.events.labelled(str(v))) / row["events"])


def test_loop_command_refuses_a_bad_population(tmp_path: Path, toy_data: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\npeople:\n  - type: a\n    traits: {flow: {sconds: 1}}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "router.cli", "loop", "--simulate", "--data", str(toy_data),
                           "--population", str(bad), "--out", str(tmp_path / "run")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "bad.yaml.people[0].traits.flow: unknown key 'sconds' (did you mean 'seconds'?)" in done.stderr
