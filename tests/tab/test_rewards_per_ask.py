"""Reward per request asked (``specialists.tab.rewards.per_ask``, issue 35): the requests Tab
off did not make count at 0, so a policy does not gain by driving a person to switch Tab off
and losing that person's requests from its denominator."""

from __future__ import annotations

import math
import statistics

import pytest

from specialists.tab.rewards import per_ask


def test_it_is_the_mean_and_se_of_the_rewards_padded_with_zeros() -> None:
    rewards = [0.75, -0.25, -0.25, 0.4, 0.0, -1.0, 0.3]
    padded = rewards + [0.0] * 5
    mean, se = per_ask(rewards, 5)
    assert mean == pytest.approx(statistics.fmean(padded))
    assert se == pytest.approx(statistics.stdev(padded) / math.sqrt(len(padded)))
    assert per_ask([], 0) == (0.0, 0.0)
    assert per_ask([0.5, 0.1], 0)[0] == pytest.approx(0.3)  # nothing off: reward per request


def test_driving_a_person_off_wins_per_request_and_loses_per_ask() -> None:
    takers = [0.2] * 50
    # A annoys the impatient person into switching Tab off: 10 bad requests, 40 never made;
    # B keeps them on with 50 slightly bad ones
    a, b = takers + [-0.3] * 10, takers + [-0.05] * 50
    assert statistics.fmean(a) > statistics.fmean(b)  # per request, A looks better ...
    assert per_ask(a, 40)[0] < per_ask(b, 0)[0]  # ... per request asked, B is
    assert per_ask(a, 40)[0] == pytest.approx((50 * 0.2 - 10 * 0.3) / 100)
