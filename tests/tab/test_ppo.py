"""The PPO update the live loop and the learning benchmark share (issue 15)."""

from __future__ import annotations

import pytest

from specialists.tab.features import observe
from specialists.tab.policy import (OPTIMIZER_FILE, Action, OffPolicyError, PolicyConfig, PPOConfig, Sample,
                                    TabPolicy)
from specialists.tab.types import TabRequest

FILE = "value = compute(alpha, beta)\nother = compute("


def _obs():
    return observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))


def _policy(**kw) -> TabPolicy:
    policy = TabPolicy(PolicyConfig(ent_coef=0.0, **kw), seed=3)
    policy.fit_normalizer([_obs()])
    return policy


def _batch(policy: TabPolicy, index: int, reward: float, n: int = 32, version: int | None = None,
           logprob: float | None = None) -> list[Sample]:
    obs = _obs()
    lp = policy.logprobs([obs], [index])[0]
    return [Sample(obs, Action(index=index, logprob=lp if logprob is None else logprob,
                               version=policy.version if version is None else version), reward)
            for _ in range(n)]


def test_ppo_raises_the_logprob_of_a_positive_advantage_and_lowers_a_negative_one() -> None:
    obs = _obs()
    assert len(obs.rows) >= 2
    moved = {}
    for reward in (1.0, -1.0):  # the value starts near 0: the advantage has the reward's sign
        policy = _policy()
        before = policy.logprobs([obs], [2])[0]
        stats = policy.ppo_update(_batch(policy, 2, reward),
                                  PPOConfig(epochs=4, minibatches=2, target_kl=10.0, lr=0.01))
        moved[reward] = policy.logprobs([obs], [2])[0] - before
        assert policy.version == 1
        assert stats["tab/epochs"] == 4 and stats["tab/steps"] == 8
        assert stats["tab/kl"] > 0 and stats["tab/grad_norm"] > 0
        assert 0.0 <= stats["tab/clip_frac"] <= 1.0
    assert moved[1.0] > 0.05 and moved[-1.0] < -0.05


def test_ratio_clip_bounds_how_far_one_batch_moves_the_policy() -> None:
    """Past 1 + ε the clipped objective has no gradient: many epochs at a high learning rate
    move the favoured action's probability far less with a small clip than without one
    (not to exactly 1 + ε: Adam's momentum carries on a little)."""
    moves = {}
    for clip in (0.05, 100.0):
        policy = _policy(vf_coef=0.0)
        obs = _obs()
        lp0 = policy.logprobs([obs], [1])[0]
        policy.ppo_update(_batch(policy, 1, 0.75), PPOConfig(epochs=30, minibatches=1, clip=clip,
                                                             target_kl=1e9, lr=0.001))
        moves[clip] = policy.logprobs([obs], [1])[0] - lp0
    assert 0 < moves[0.05] < 0.5 * moves[100.0]


def test_kl_guard_stops_the_epochs() -> None:
    free, guarded = _policy(), _policy()
    cfg = dict(epochs=12, minibatches=2, lr=0.05)
    s_free = free.ppo_update(_batch(free, 1, 0.75), PPOConfig(target_kl=1e9, **cfg))
    s_guard = guarded.ppo_update(_batch(guarded, 1, 0.75), PPOConfig(target_kl=1e-4, **cfg))
    assert s_free["tab/epochs"] == 12 and s_free["tab/kl_stopped"] == 0.0
    assert s_guard["tab/kl_stopped"] == 1.0 and s_guard["tab/steps"] < 24
    assert s_guard["tab/kl"] < s_free["tab/kl"]


def test_optimizer_state_and_advantage_scale_round_trip(tmp_path) -> None:
    import torch

    policy = _policy(normalize_advantages=True)
    policy.ppo_update(_batch(policy, 1, 0.75) + _batch(policy, 0, 0.0), PPOConfig(lr=0.004))
    policy.save(tmp_path)
    assert (tmp_path / OPTIMIZER_FILE).exists()
    loaded = TabPolicy.load(tmp_path)
    a, b = policy.opt.state_dict(), loaded.opt.state_dict()
    assert a["param_groups"][0]["lr"] == b["param_groups"][0]["lr"] == 0.004
    assert a["state"].keys() == b["state"].keys() and a["state"]
    for k in a["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(torch.as_tensor(a["state"][k][name]), torch.as_tensor(b["state"][k][name]))
    assert loaded.adv_stats == policy.adv_stats and policy.adv_stats["count"] == 64
    # the next update continues Adam's moments: its step count goes on from the saved one
    loaded.ppo_update(_batch(loaded, 1, 0.75), PPOConfig(epochs=1, minibatches=1))
    steps = [int(torch.as_tensor(s["step"])) for s in loaded.opt.state_dict()["state"].values()]
    saved = [int(torch.as_tensor(s["step"])) for s in a["state"].values()]
    assert steps == [n + 1 for n in saved]


def test_stale_samples_outside_the_window_are_refused() -> None:
    policy = _policy()
    policy.version = 5
    fresh = _batch(policy, 1, 0.75, 4)
    with pytest.raises(OffPolicyError, match="current version 5"):
        policy.ppo_update(fresh + _batch(policy, 1, 0.75, 2, version=4))  # on-policy by default
    with pytest.raises(OffPolicyError, match=r"\[2\]"):
        policy.ppo_update(fresh + _batch(policy, 1, 0.75, 2, version=2), PPOConfig(max_staleness=2))
    assert policy.version == 5  # a refused update changes nothing
    stats = policy.ppo_update(fresh + _batch(policy, 1, 0.75, 4, version=3), PPOConfig(max_staleness=2))
    assert policy.version == 6 and stats["tab/stale_share"] == 0.5


def test_importance_weights_are_clipped() -> None:
    policy = _policy()
    policy.version = 1
    # logged by version 0 with a far lower probability than the current policy gives: raw weight >> c
    stale = _batch(policy, 1, 0.75, 8, version=0, logprob=-12.0)
    fresh = _batch(policy, 1, 0.75, 8)
    stats = policy.ppo_update(stale + fresh, PPOConfig(max_staleness=1, is_clip=1.5))
    assert stats["tab/is_clipped"] == 0.5  # the stale half
    assert stats["tab/is_weight"] == pytest.approx((8 * 1.5 + 8 * 1.0) / 16, abs=1e-5)
    # a stale sample the current policy would rarely draw weighs (almost) nothing
    policy2 = _policy()
    policy2.version = 1
    lp = policy2.logprobs([_obs()], [1])[0]
    rare = _batch(policy2, 1, 0.75, 8, version=0, logprob=lp + 5.0)
    stats2 = policy2.ppo_update(rare, PPOConfig(max_staleness=1, is_clip=1.5))
    assert stats2["tab/is_weight"] == pytest.approx(pytest.approx(2.718281828 ** -5, rel=1e-3))
    assert stats2["tab/is_clipped"] == 0.0


def test_reward_estimates_move_an_action_the_batch_never_sampled() -> None:
    """q_values: with every sample "show nothing" (reward 0), the sampled-action gradient says
    nothing for action 2 (it only moves as "nothing" does); an estimate that action 2 pays and the others cost moves it up
    (the all-action term), and estimates that are flat and equal to the rewards move nothing."""
    obs = _obs()
    n = len(obs.rows)
    assert n >= 3
    cfg = PPOConfig(epochs=4, minibatches=2, target_kl=10.0, lr=0.01)
    pays = [0.0] + [-0.5] * n
    pays[2] = 1.0
    moved = {}
    for name, q in (("none", None), ("pays", pays), ("flat", [0.0] * (1 + n))):
        policy = _policy(vf_coef=0.0)
        before = policy.logprobs([obs], [2])[0]
        batch = _batch(policy, 0, 0.0)
        policy.ppo_update(batch, cfg, q_values=None if q is None else [q] * len(batch))
        moved[name] = policy.logprobs([obs], [2])[0] - before
    assert moved["pays"] > 0.3 and moved["pays"] > moved["none"] + 0.3
    assert moved["flat"] == 0.0  # no advantage anywhere: no step


def test_reward_estimates_of_the_wrong_shape_are_refused() -> None:
    policy = _policy()
    batch = _batch(policy, 1, 0.75, 4)
    n = len(batch[0].obs.rows)
    with pytest.raises(ValueError, match="one per sample"):
        policy.ppo_update(batch, q_values=[[0.0] * (1 + n)] * 3)
    with pytest.raises(ValueError, match=r"q_values\[0\] has 2 estimates"):
        policy.ppo_update(batch, q_values=[[0.0, 1.0]] * 4)
    assert policy.version == 0  # a refused update changes nothing
