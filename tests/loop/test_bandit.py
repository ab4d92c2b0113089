"""LinUCB over the policy's features and actions: the issue-15 baseline."""

from __future__ import annotations

from specialists.tab.features import observe
from specialists.tab.loop.bandit import LinUCB
from specialists.tab.policy import PolicyConfig, TabPolicy
from specialists.tab.types import TabRequest

FILE = "value = compute(alpha, beta)\nother = compute("


def _obs():
    return observe(TabRequest(file=FILE, cursor=len(FILE), language="python"))


def test_linucb_learns_which_action_pays_and_when_to_stay_silent() -> None:
    obs = _obs()
    policy = TabPolicy(PolicyConfig())
    policy.fit_normalizer([obs])
    bandit = LinUCB.like(policy, alpha=0.5)
    good = next(i for i in range(len(obs.rows)) if obs.suggestion(i).text == "alpha") + 1
    first = bandit.choose(obs)
    assert first.index > 0  # optimism: an untried action's bonus beats "nothing" (0)
    assert bandit.choose(obs, explore=False).index == 0  # greedy, knowing nothing: stay silent
    for _ in range(40):
        c = bandit.choose(obs)
        bandit.update([(obs, c.index, 0.75 if c.index == good else -0.25)])
    assert bandit.choose(obs, explore=False).index == good
    # every action costs: the greedy bandit stops showing
    silent = LinUCB.like(policy, alpha=0.5)
    silent.update([(obs, i + 1, -0.25) for i in range(len(obs.rows)) for _ in range(5)])
    assert silent.choose(obs, explore=False).index == 0
    assert silent.update([(obs, 0, 0.0)]) == 0  # "nothing" teaches nothing: its reward is known


def test_cross_fitted_values_never_see_their_own_reward() -> None:
    from specialists.tab.loop.bandit import cross_fitted_values

    obs = _obs()
    policy = TabPolicy(PolicyConfig())
    policy.fit_normalizer([obs])
    model = LinUCB.like(policy, alpha=0.0, reward_none=0.1)
    model.update([(obs, 1, 0.5)])  # what it saw before
    theta = model.theta.copy()
    examples = [(obs, 1 + i % len(obs.rows), 0.2 * i) for i in range(6)]
    values = cross_fitted_values(model, examples)
    assert len(values) == 6 and all(len(v) == 1 + len(obs.rows) and v[0] == 0.1 for v in values)
    assert (model.theta == theta).all() and model.n == 1  # the model is left as it was
    changed = list(examples)
    changed[0] = (obs, examples[0][1], 9.0)  # example 0 (fold 0) pays far more
    again = cross_fitted_values(model, changed)
    assert (again[0] == values[0]).all() and (again[2] == values[2]).all()  # fold 0: blind to it
    assert not (again[1] == values[1]).all()  # fold 1 was fitted with it
    # and the estimate is the regression's: an action that paid reads higher than one that cost
    fitted = LinUCB.like(policy, alpha=0.0)
    fitted.update([(obs, 1, 1.0), (obs, 2, -1.0)] * 10)
    v = fitted.values(obs)
    assert v[1] > 0.2 and v[2] < -0.2


def test_the_bandit_serves_two_people_opposite_lengths_only_with_the_interactions() -> None:
    """A brief person is paid for the shortest cut and charged for the longest; a liner the
    other way round. Told only who is who through the session's history (a high or a low
    share of long suggestions accepted), the bandit with the action x history features picks
    each their own cut; without them (``interact=()``) one cut for both."""
    import numpy as np

    from specialists.tab.features import PERSONAL_FEATURES

    obs = _obs()
    policy = TabPolicy(PolicyConfig())
    policy.fit_normalizer([obs])
    lengths = [len(obs.suggestion(i).text) for i in range(len(obs.rows))]
    short, long_ = 1 + int(np.argmin(lengths)), 1 + int(np.argmax(lengths))
    assert lengths[short - 1] < lengths[long_ - 1]

    def person(long_share: float):
        x = np.full(len(PERSONAL_FEATURES), 0.5, np.float32)
        x[PERSONAL_FEATURES.index("s_long_accept_ratio")] = long_share
        return obs.with_personal(x)

    brief, liner = person(0.1), person(0.9)
    events = [(brief, short, 1.0), (brief, long_, -1.0), (liner, short, -1.0), (liner, long_, 1.0)] * 20
    picks = {}
    for interact in (("s_long_accept_ratio",), ()):
        bandit = LinUCB.like(policy, alpha=0.0, interact=interact)
        bandit.update(events)
        picks[interact] = (bandit.choose(brief, explore=False).index, bandit.choose(liner, explore=False).index)
    assert picks[("s_long_accept_ratio",)] == (short, long_)
    a, b = picks[()]
    assert a == b  # one linear model over (action, state) side by side: the same cut for both
    # without personal features the interactions are zero: the estimates are the plain model's
    plain, crossed = LinUCB.like(policy, alpha=0.0, interact=()), LinUCB.like(policy, alpha=0.0)
    for m in (plain, crossed):
        m.update([(obs, short, 0.5), (obs, long_, -0.5)] * 5)
    assert np.allclose(plain.values(obs), crossed.values(obs))
