"""The canary (issue 15) against a real server and a real SQLite store: a candidate served to
a share of the editors, each kept to one version; every answer and event naming the version
that drew it; `complement loop` promoting a better candidate and rolling back a worse one on
the live reward it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from specialists.tab.data import load_split
from specialists.tab.loop.gate import judge_canary, two_sample_difference
from specialists.tab.loop.versions import PolicyStore
from specialists.tab.specialist import in_canary
from tests.loop.test_loop import served  # noqa: F401  (the fixture: a real server over HTTP)

REPO = Path(__file__).resolve().parents[2]
#: a body-less POST still says its content type (the server refuses others: issue 41, F7)
JSON = {"content-type": "application/json"}


def test_assignment_is_stable_independent_and_near_the_share() -> None:
    keys = [f"editor-{i}" for i in range(20_000)]
    first = [in_canary(k, 7, 0.1) for k in keys]
    assert first == [in_canary(k, 7, 0.1) for k in keys], "one editor, one arm"
    assert abs(sum(first) / len(keys) - 0.1) < 0.01
    assert abs(sum(in_canary(k, 7, 0.5) for k in keys) / len(keys) - 0.5) < 0.015
    other = [in_canary(k, 8, 0.1) for k in keys]  # the next canary draws other editors
    both = sum(a and b for a, b in zip(first, other)) / len(keys)
    assert abs(both - 0.01) < 0.005
    assert not any(in_canary(k, 7, 0.0) for k in keys[:1000])


def test_two_sample_interval_is_welchs_for_one_request_units() -> None:
    import statistics

    new = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    old = [0.0, 0.0, 1.0, 0.0]
    diff, low, high, r_new, r_old = two_sample_difference([(x, 1.0) for x in new],
                                                          [(x, 1.0) for x in old])
    se = (statistics.variance(new) / len(new) + statistics.variance(old) / len(old)) ** 0.5
    assert (r_new, r_old) == (pytest.approx(4 / 6), pytest.approx(0.25))
    assert diff == pytest.approx(4 / 6 - 0.25)
    assert (low, high) == (pytest.approx(diff - 1.96 * se), pytest.approx(diff + 1.96 * se))
    with pytest.raises(ValueError):
        two_sample_difference([], [(1.0, 1.0)])


def _candidate(store: PolicyStore, deployed: int, version: int, none_bias: float,
               tmp: Path) -> int:
    """The deployed policy with its 'show nothing' logit pinned: +50 never shows, -50
    always shows what it has."""
    import torch

    from specialists.tab.policy import TabPolicy

    policy = TabPolicy.load(store.path(deployed))
    with torch.no_grad():
        policy.net.none.bias.fill_(none_bias)
    policy.version = version
    policy.save(tmp / f"v{version}")
    store.publish(tmp / f"v{version}", version, {"parent": deployed, "source": "test"})
    return version


def _type_and_accept(url: str, sessions: bool = True) -> dict[str, set[Any]]:
    """Users who accept every suggestion type the toy files; each file position is its own
    editor session (typed twice: a session must get the same version both times). Returns
    each session's versions."""
    seen: dict[str, set[Any]] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for p, pair in enumerate(load_split(Path(os.environ["TOY_DATA"]), "toy")):
            text = pair.after
            for cursor in range(4, len(text), 3):
                session = f"editor-{p}-{cursor}"
                for _ in range(2 if sessions else 1):
                    body = {"file": text[:cursor], "cursor": cursor, "language": "python"}
                    if sessions:
                        body["session"] = session
                    answer = client.post("/v1/tab", json=body).json()
                    seen.setdefault(session, set()).add(answer["policy_version"])
                    if answer["suggestion"] is not None:
                        r = client.post("/v1/feedback", json={
                            "request_id": answer["request_id"], "outcome": "accepted"})
                        assert r.status_code == 200, r.text
    return seen


@pytest.fixture(autouse=True)
def _toy(toy_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOY_DATA", str(toy_data))


def test_a_canary_serves_its_share_by_session_and_logs_its_version(
        served: tuple[str, Any, PolicyStore, int], tmp_path: Path) -> None:  # noqa: F811
    url, app, store, v = served
    c = _candidate(store, v, v + 1, 0.0, tmp_path)  # the same head, another number
    r = httpx.post(f"{url}/v1/tab/canary", json={"version": c, "share": 0.3}, timeout=60)
    assert r.status_code == 200, r.text
    assert store.canary() is not None and store.canary()["version"] == c
    seen = _type_and_accept(url)
    assert all(len(versions) == 1 for versions in seen.values()), "a session flipped versions"
    on_canary = sum(versions == {c} for versions in seen.values())
    assert {v, c} == set().union(*seen.values())
    share = on_canary / len(seen)
    assert abs(share - 0.3) < 0.12, (share, len(seen))
    assert share == pytest.approx(sum(in_canary(s, c, 0.3) for s in seen) / len(seen))
    # each event is attributed to the version that drew it
    stats = {row["version"]: row["events"] for row in app.state.events.version_stats()}
    assert stats[str(c)] == 2 * on_canary and stats[str(v)] == 2 * (len(seen) - on_canary)
    listed = httpx.get(f"{url}/v1/tab/versions").json()
    assert listed["canary"]["version"] == c and listed["deployed"] == v
    assert listed["deploys"][0]["event"] == "canary_start"

    # refusals say why; an abort ends it for everyone
    assert httpx.post(f"{url}/v1/tab/canary", json={"version": v, "share": 0.3}).status_code == 409
    assert httpx.post(f"{url}/v1/tab/canary", json={"version": 999, "share": 0.3}).status_code == 404
    assert httpx.post(f"{url}/v1/tab/canary", json={"version": c, "share": 1.0}).status_code == 400
    assert httpx.post(f"{url}/v1/tab/canary/abort", headers=JSON).json()["aborted"] == c
    assert store.canary() is None
    assert set().union(*_type_and_accept(url, sessions=False).values()) == {v}
    assert httpx.post(f"{url}/v1/tab/canary/promote", headers=JSON).status_code == 409

    # a deploy ends a running canary (it was measured against the version it replaces)
    assert httpx.post(f"{url}/v1/tab/canary", json={"version": c, "share": 0.5}).status_code == 200
    assert httpx.post(f"{url}/v1/tab/deploy", json={"version": c}).status_code == 200
    assert store.canary() is None and store.deployed() == c
    assert app.state.registry.get("tab").canary is None


def _loop(url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COMPLEMENT_API_KEY"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "router.cli", "loop", *args, "--server", url,
                           "--data-dir", str(data_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_loop_rolls_back_a_worse_canary_and_promotes_a_better_one(
        served: tuple[str, Any, PolicyStore, int], tmp_path: Path) -> None:  # noqa: F811
    """Users who accept every suggestion: a never-show candidate earns nothing and is rolled
    back; an always-show one earns more than the deployed version and is promoted. The loop
    (the CLI) judges the canary the server runs, as it does after an interrupted turn."""
    url, app, store, v = served
    state = store.root.parent
    never = _candidate(store, v, v + 1, 50.0, tmp_path)
    always = _candidate(store, v, v + 2, -50.0, tmp_path)
    judge = ["--turns", "1", "--canary-min-events", "15", "--interval", "0.2", "--wait", "60"]

    assert httpx.post(f"{url}/v1/tab/canary", json={"version": never, "share": 0.5}).status_code == 200
    _type_and_accept(url)
    done = _loop(url, state, *judge)
    assert done.returncode == 0, done.stderr[-3000:]
    turn = json.loads(done.stdout)["turns"][0]
    assert turn["candidate"] == never and not turn["shipped"], turn
    assert turn["canary"]["decision"] == "rolled_back"
    assert turn["canary"]["reward_candidate"] == 0.0 < turn["canary"]["reward_deployed"]
    assert turn["canary"]["ci"][1] < 0 and turn["canary"]["events_candidate"] >= 15
    assert store.canary() is None and store.deployed() == v

    assert httpx.post(f"{url}/v1/tab/canary", json={"version": always, "share": 0.5}).status_code == 200
    _type_and_accept(url)
    done = _loop(url, state, *judge)
    assert done.returncode == 0, done.stderr[-3000:]
    turn = json.loads(done.stdout)["turns"][0]
    assert turn["candidate"] == always and turn["shipped"], turn
    assert turn["canary"]["decision"] == "promoted" and turn["canary"]["ci"][0] > 0
    assert store.canary() is None and store.deployed() == always
    answer = httpx.post(f"{url}/v1/tab", json={"file": "def f(x):\n    return x\n\nde",
                                               "cursor": 25, "session": "anyone"}).json()
    assert answer["policy_version"] == always

    log = [d["event"] for d in app.state.events.deploy_log(20)]
    assert log[:4] == ["canary_promoted", "canary_passed", "canary_start", "canary_aborted"]
    assert log[4:6] == ["canary_failed", "canary_start"]
    status = _loop(url, state, "status")
    info = json.loads(status.stdout)
    assert info["last_canary"]["event"] == "canary_passed" and info["canary"] is None
    assert [t["canary"]["decision"] for t in info["live_turns"]] == ["rolled_back", "promoted"]


def test_judge_canary_needs_events_in_both_arms() -> None:
    from specialists.tab.events import LabelledEvent

    shown = LabelledEvent("a", "2", "1", -0.1, True, {}, "x", "accepted", 1)
    result = judge_canary([shown] * 30, [shown], 2, 1, min_events=10)
    assert not result.passed and "only 30 canary and 1 deployed" in result.reason


def test_the_loop_starts_a_canary_after_the_gate_and_judges_it_when_run_again(
        served: tuple[str, Any, PolicyStore, int]) -> None:  # noqa: F811
    """A turn from scratch: train, gate, start the canary (not a deploy); with no traffic the
    wait gives up and the canary keeps running; the next run judges it."""
    url, app, store, v = served
    state = store.root.parent
    _type_and_accept(url)
    first = _loop(url, state, "--turns", "1", "--min-events", "30", "--gate-margin", "1.0",
                  "--canary-share", "0.5", "--canary-min-events", "10", "--interval", "0.2",
                  "--wait", "2")
    assert first.returncode == 0, first.stderr[-3000:]
    turn = json.loads(first.stdout)["turns"][0]
    candidate = turn["candidate"]
    assert turn["parent"] == v and candidate != v and not turn["shipped"]
    assert turn["canary"]["decision"] == "waiting" and turn["canary"]["share"] == 0.5
    assert store.canary()["version"] == candidate and store.deployed() == v, \
        "a gated candidate goes to a canary, not to everyone"
    assert "keeps running" in first.stderr

    seen = _type_and_accept(url)
    assert {v, candidate} == set().union(*seen.values())
    again = _loop(url, state, "--turns", "1", "--canary-min-events", "10", "--interval", "0.2",
                  "--wait", "60")
    assert again.returncode == 0, again.stderr[-3000:]
    judged = json.loads(again.stdout)["turns"][0]
    assert judged["candidate"] == candidate
    assert judged["canary"]["decision"] in ("promoted", "rolled_back")
    assert store.canary() is None
    assert store.deployed() == (candidate if judged["shipped"] else v)
    events = [d["event"] for d in app.state.events.deploy_log(20)]
    assert events[1] in ("canary_passed", "canary_failed") and "gate_passed" in events


def test_zero_share_deploys_at_once_and_a_bad_share_is_refused(
        served: tuple[str, Any, PolicyStore, int]) -> None:  # noqa: F811
    url, app, store, v = served
    state = store.root.parent
    bad = _loop(url, state, "--turns", "1", "--canary-share", "1.5")
    assert bad.returncode == 2 and "--canary-share" in bad.stderr
    _type_and_accept(url, sessions=False)
    done = _loop(url, state, "--turns", "1", "--min-events", "30", "--gate-margin", "1.0",
                 "--canary-share", "0", "--wait", "30", "--interval", "0.2")
    assert done.returncode == 0, done.stderr[-3000:]
    turn = json.loads(done.stdout)["turns"][0]
    assert turn["shipped"] and turn["canary"] == {} and store.deployed() == turn["candidate"]


def test_judge_canary_rolls_back_only_what_it_shows_worse() -> None:
    """An equal canary is promoted on a few hundred events; one clearly worse is rolled
    back; one a little worse, within what the events can tell, goes through (the gate
    before the canary judged it on held-out events)."""
    import random

    from specialists.tab.events import LabelledEvent

    rng = random.Random(3)

    def events(p_accept: float, n: int) -> list[Any]:
        return [LabelledEvent(f"r{i}", "1", "1", -0.5, True, {}, "x",
                              "accepted" if rng.random() < p_accept else "rejected", 1)
                for i in range(n)]

    base = events(0.5, 300)
    assert judge_canary(events(0.5, 300), base, 2, 1, margin=0.005, min_events=200).passed
    assert not judge_canary(events(0.2, 300), base, 2, 1, margin=0.005, min_events=200).passed
    assert judge_canary(events(0.48, 300), base, 2, 1, margin=0.005, min_events=200).passed
