"""The live trainer's PPO update: carried optimizer state, the on-policy rule by default and
stale reuse within a lineage window (issue 15). No server: the event store and policy
versions directly."""

from __future__ import annotations

from pathlib import Path

import pytest

from specialists.tab.events import ActionRecord, EventStore, Feedback, sqlite_url
from specialists.tab.features import observe, to_features
from specialists.tab.loop.trainer import ancestors, train_from_events
from specialists.tab.loop.versions import PolicyStore
from specialists.tab.policy import OPTIMIZER_FILE, PolicyConfig, PPOConfig, TabPolicy
from specialists.tab.types import TabRequest

FILE = "value = compute(alpha, beta)\nother = compute("


def _log(events: EventStore, policy: TabPolicy, version: int, n: int, tag: str) -> None:
    """``n`` events drawn by ``policy`` and logged as ``version``'s, each answered."""
    obs = observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))
    for i in range(n):
        a = policy.act(obs)
        rid = f"{tag}-{i}"
        events.record_action(ActionRecord(rid, str(version), str(a.index), a.logprob, a.shown,
                                          features=to_features(obs), suggestion=a.suggestion.text
                                          if a.suggestion else None))
        if a.shown:
            events.record_feedback(Feedback(rid, "accepted" if a.index == 1 else "rejected"))


@pytest.fixture
def lineage(tmp_path: Path) -> tuple[EventStore, PolicyStore, TabPolicy]:
    """Versions 1 -> 2 -> 3 (deployed), each with 6 events, and 2 events of an unrelated 99."""
    store = PolicyStore(tmp_path / "tab")
    events = EventStore(sqlite_url(tmp_path))
    policy = TabPolicy(PolicyConfig(), seed=0)
    policy.fit_normalizer([observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))])
    for v, parent in ((1, None), (2, 1), (3, 2)):
        policy.version = v
        policy.save(tmp_path / f"p{v}")
        store.publish(tmp_path / f"p{v}", v, {"parent": parent})
        _log(events, policy, v, 6, f"v{v}")
    _log(events, policy, 99, 2, "other")
    store.set_deployed(3)
    yield events, store, policy
    events.close()


def test_on_policy_by_default_and_the_optimizer_state_goes_with_the_version(lineage) -> None:
    import torch

    events, store, _ = lineage
    report = train_from_events(events, store)
    assert report.parent == 3 and report.version == 4
    assert report.events_used == 6 and report.stale_used == 0
    assert report.off_policy_refused == 6 + 6 + 2  # versions 1, 2 and 99
    assert report.stats["tab/epochs"] >= 1 and "tab/kl" in report.stats
    assert (store.path(4) / OPTIMIZER_FILE).exists()  # the next version continues Adam
    assert store.lineage(4)["stale_used"] == 0
    v4 = TabPolicy.load(store.path(4))
    steps = {int(torch.as_tensor(s["step"])) for s in v4.opt.state_dict()["state"].values()}
    assert steps == {int(report.stats["tab/steps"])}


def test_stale_reuse_takes_the_window_and_refuses_older(lineage) -> None:
    events, store, _ = lineage
    assert ancestors(store, 3, 5) == [2, 1]
    report = train_from_events(events, store, ppo=PPOConfig(max_staleness=1, is_clip=2.0))
    assert report.events_used == 6 and report.stale_used == 6  # version 2's
    assert report.off_policy_refused == 6 + 2  # version 1 is beyond the window; 99 unrelated
    assert report.stats["tab/stale_share"] == pytest.approx(0.5)
    assert report.stats["tab/is_weight"] <= 2.0
    assert store.lineage(report.version)["stale_used"] == 6
    wide = train_from_events(events, store, ppo=PPOConfig(max_staleness=2))
    assert wide.stale_used == 12 and wide.off_policy_refused == 2


def test_the_reward_regression_is_fitted_on_the_lineage_and_changes_the_update(lineage) -> None:
    """q_model: the regression reads every shown event of the deployed version's lineage
    (versions 1 and 2 beside 3's own; never the unrelated 99) and moves the update; the
    events trained on are still version 3's alone."""
    events, store, _ = lineage
    shown = {v: sum(1 for e in events.labelled(str(v)) if e.credited and int(e.action) > 0) for v in (1, 2, 3)}
    plain = train_from_events(events, store)
    store.set_deployed(3)
    with_q = train_from_events(events, store, q_model=True)
    assert with_q.parent == 3 and with_q.events_used == 6 and with_q.stale_used == 0
    assert with_q.stats["tab/q_events"] == shown[1] + shown[2] + shown[3]
    assert "tab/q_events" not in plain.stats
    a, b = TabPolicy.load(store.path(plain.version)), TabPolicy.load(store.path(with_q.version))
    obs = observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))
    assert a.logprobs([obs], [1]) != b.logprobs([obs], [1])


def test_loop_cli_takes_q_model() -> None:
    import argparse

    from router.commands.loop import register

    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    p = sub.choices["loop"]
    assert p.parse_args(["--q-model"]).q_model is True
    assert p.parse_args([]).q_model is False
