"""The policy's act/train_step API and its on-policy version check."""

from __future__ import annotations

import pytest

from specialists.tab.features import observe
from specialists.tab.policy import OffPolicyError, PolicyConfig, Sample, TabPolicy
from specialists.tab.types import TabRequest

FILE = "value = compute(alpha, beta)\nother = compute("


def _obs():
    return observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))


def test_act_carries_version_and_logprob() -> None:
    policy = TabPolicy(PolicyConfig(), version=7)
    obs = _obs()
    action = policy.act(obs)
    assert action.version == 7
    assert action.logprob <= 0.0
    assert 0 <= action.index <= len(obs.rows)
    assert (action.suggestion is None) == (action.index == 0)
    greedy = policy.act(obs, sample=False)
    assert greedy.version == 7


def test_act_with_no_candidates_shows_nothing() -> None:
    policy = TabPolicy(PolicyConfig())
    obs = observe(TabRequest(file="zzz", cursor=3, language="python"))
    assert len(obs.rows) == 0
    action = policy.act(obs)
    assert action.index == 0 and action.suggestion is None and action.logprob == pytest.approx(0.0)


def test_train_step_refuses_off_policy_samples() -> None:
    policy = TabPolicy(PolicyConfig())
    obs = _obs()
    old = Sample(obs=obs, action=policy.act(obs), reward=0.75)
    policy.train_step([old])  # version 0 -> 1
    assert policy.version == 1
    with pytest.raises(OffPolicyError):
        policy.train_step([old])  # drawn by version 0
    fresh = Sample(obs=obs, action=policy.act(obs), reward=-0.25)
    with pytest.raises(OffPolicyError):
        policy.train_step([fresh, old])  # one stale sample spoils the batch
    assert policy.version == 1  # a refused update changes nothing
    policy.train_step([fresh])
    assert policy.version == 2


def test_reinforce_learns_to_prefer_the_rewarded_action() -> None:
    policy = TabPolicy(PolicyConfig(lr=0.05, ent_coef=0.0), seed=1)
    obs = _obs()
    target = next(i for i in range(len(obs.rows)) if obs.suggestion(i).text == "alpha") + 1
    policy.fit_normalizer([obs])
    for _ in range(60):
        samples = []
        for _ in range(16):
            a = policy.act(obs)
            samples.append(Sample(obs=obs, action=a, reward=0.75 if a.index == target else -0.25
                                  if a.index else 0.0))
        policy.train_step(samples)
    assert policy.act(obs, sample=False).index == target


def test_save_and_load_round_trip(tmp_path) -> None:
    policy = TabPolicy(PolicyConfig(), version=3)
    obs = _obs()
    policy.fit_normalizer([obs])
    policy.save(tmp_path)
    loaded = TabPolicy.load(tmp_path)
    assert loaded.version == 3
    a, b = policy.act(obs, sample=False), loaded.act(obs, sample=False)
    assert a.index == b.index and a.logprob == pytest.approx(b.logprob, abs=1e-6)


def test_acting_in_numpy_equals_the_torch_head_before_and_after_an_update() -> None:
    """``act_many`` runs the head in numpy over views of its weights (issue 17): its logits
    and value are the torch head's to float rounding — also after an update has changed the
    weights in place, and with the LM's hidden state as an input."""
    import numpy as np
    import torch

    obs_list = [_obs(), observe(TabRequest(file="zzz", cursor=3, language="python")),
                observe(TabRequest(file="def f(a):\n    return a\n\nf(", cursor=22, language="python"))]
    hidden = 8
    for o in obs_list:
        o.hidden = np.linspace(-1, 1, hidden, dtype=np.float32)
    policy = TabPolicy(PolicyConfig(hidden_size=hidden, lr=0.05), seed=3)
    policy.fit_normalizer(obs_list)

    def same() -> None:
        with torch.inference_mode():
            logits, value = policy.net(*policy._tensors(obs_list))
        ln, vn = policy._head_numpy(*policy._arrays(obs_list))
        assert np.array_equal(np.isfinite(ln), np.isfinite(logits.numpy()))
        finite = np.isfinite(ln)
        assert np.allclose(ln[finite], logits.numpy()[finite], atol=1e-5)
        assert np.allclose(vn, value.numpy(), atol=1e-5)

    same()
    before = policy._head_numpy(*policy._arrays(obs_list))[0].copy()
    policy.train_step([Sample(obs=o, action=policy.act(o), reward=1.0) for o in obs_list])
    same()
    # a copy of a policy that has acted trains its own weights, and acts with them
    import copy

    policy = copy.deepcopy(policy)
    policy.train_step([Sample(obs=o, action=policy.act(o), reward=-1.0) for o in obs_list])
    same()
    assert not np.allclose(before[np.isfinite(before)],
                           policy._head_numpy(*policy._arrays(obs_list))[0][np.isfinite(before)])


def test_a_feature_constant_when_the_scales_are_fitted_is_not_blown_up() -> None:
    """complement tab train fits the scales on a pass that shows nothing, where the last
    outcome is never "accepted": that input must not later arrive as (1 − 0) / 0.001 and
    saturate the state layer (issue 35: the shipped head's 64 units all sat at ±1 after
    every shown suggestion)."""
    import numpy as np
    import torch

    from specialists.tab.policy import POLICY_STATE

    obs = _obs()
    policy = TabPolicy(PolicyConfig(), seed=0)
    policy.fit_normalizer([obs, observe(TabRequest(file="zzz", cursor=3, language="python"))])
    j = POLICY_STATE.index("last_accepted")
    assert policy.net.s_std[j] == 1.0
    later = _obs()
    later.dynamic = later.dynamic.copy()
    later.dynamic[0] = 1.0  # the last suggestion was accepted
    state = torch.from_numpy(np.stack([policy._arrays([later])[0][0]]))
    x = (state - policy.net.s_mean) / policy.net.s_std
    assert float(x.abs().max()) < 50
    with torch.no_grad():
        pre = policy.net.state[0](x)
    assert float((pre.abs() > 4).float().mean()) < 0.5  # the state layer still reads its inputs


def test_explore_draws_what_the_policy_leaves_alone_and_logs_the_mixture() -> None:
    """``explore`` (issue 35): a share of draws uniform over the request's actions. An action
    the policy gives almost no probability is drawn about explore / (1 + rows) of the time,
    each draw logged with the probability that drew it; 0 leaves the draws as they were."""
    import math

    import numpy as np
    import torch

    obs = _obs()
    n_act = 1 + len(obs.rows)
    policy = TabPolicy(PolicyConfig(), seed=2)
    with torch.no_grad():  # a policy sure of "show nothing"
        policy.net.none.bias.fill_(30.0)
    plain = [a.index for a in policy.act_many([obs] * 400)]
    assert set(plain) == {0}
    fresh = TabPolicy(PolicyConfig(), seed=2)
    fresh.net.load_state_dict(policy.net.state_dict())
    assert [a.index for a in fresh.act_many([obs] * 400, explore=0.0)] == plain

    eps = 0.3
    drawn = policy.act_many([obs] * 4000, explore=eps)
    shown = [a for a in drawn if a.index > 0]
    expected = 4000 * eps * (n_act - 1) / n_act
    assert abs(len(shown) - expected) < 4 * math.sqrt(expected)
    assert len({a.index for a in shown}) == n_act - 1  # every show action was tried
    for a in shown[:20]:  # logged: the mixture's probability, not the policy's (~e^-30)
        assert a.logprob == pytest.approx(math.log(eps / n_act), rel=1e-4)
        assert a.prob_show < 1e-9  # what the policy itself says is unchanged
    nothing = next(a for a in drawn if a.index == 0)
    assert nothing.logprob == pytest.approx(math.log(1 - eps + eps / n_act), rel=1e-4)
    assert np.all([a.index == 0 for a in policy.act_many([obs] * 50, sample=False, explore=eps)])
    with pytest.raises(ValueError, match="between 0 and 1"):
        policy.act(obs, explore=1.5)

    # explore_to="value": the explored share all goes to the cut that would save the most
    logits = policy._head_numpy(*policy._arrays([obs]))[0][0, 1:n_act]
    lens = np.array([len(obs.suggestion(i).text) for i in range(n_act - 1)], dtype=np.float64)
    best = 1 + int(np.argmax(logits + np.log(np.maximum(lens, 1.0))))
    valued = policy.act_many([obs] * 2000, explore=eps, explore_to="value")
    assert {a.index for a in valued} == {0, best}
    share = sum(a.index == best for a in valued) / len(valued)
    assert abs(share - eps) < 4 * math.sqrt(eps * (1 - eps) / len(valued))
    assert next(a for a in valued if a.index == best).logprob == pytest.approx(math.log(eps), rel=1e-4)
    with pytest.raises(ValueError, match="'uniform' or 'value'"):
        policy.act(obs, explore=0.1, explore_to="longest")
