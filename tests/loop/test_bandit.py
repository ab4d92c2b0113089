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
