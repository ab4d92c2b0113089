"""The gate's paired difference and its confidence interval (issue 15: a gate that can see)."""

from __future__ import annotations

import random

import pytest

from specialists.tab.loop.gate import paired_difference


def test_the_difference_is_the_two_rates_and_the_interval_holds_it() -> None:
    new = [(3.0, 10), (1.0, 5), (4.0, 10)]
    old = [(2.0, 10), (1.0, 5), (2.0, 10)]
    diff, low, high, r_new, r_old = paired_difference(new, old)
    assert r_new == pytest.approx(8 / 25) and r_old == pytest.approx(5 / 25)
    assert diff == pytest.approx(3 / 25) and low < diff < high


def test_pairing_cancels_what_both_versions_share() -> None:
    """Edits differ a lot in reward (their difficulty) but both versions see the same ones:
    the paired interval stays narrow; an unpaired comparison of the same numbers could not."""
    rng = random.Random(0)
    difficulty = [rng.uniform(-0.5, 0.5) for _ in range(200)]
    old = [(difficulty[i] * n, n) for i, n in enumerate(10 + i % 7 for i in range(200))]
    new = [(r + 0.02 * n, n) for r, n in old]  # better by 0.02 a request on every edit
    diff, low, high, _, _ = paired_difference(new, old)
    assert diff == pytest.approx(0.02) and high - low < 1e-9  # no noise left: a point
    noisy = [(r + n * rng.gauss(0.02, 0.1), n) for r, n in old]
    diff, low, high, _, _ = paired_difference(noisy, old)
    assert low < diff < high and high - low < 0.1


def test_interval_coverage_on_simulated_gates() -> None:
    """About 95% of 95% intervals hold the true difference (here 0): a check that fails if
    the standard error were off by a factor (e.g. not divided by the number of edits)."""
    rng = random.Random(1)
    hits = 0
    trials = 400
    for _ in range(trials):
        k = 40
        sizes = [rng.randint(5, 40) for _ in range(k)]
        base = [rng.uniform(-0.3, 0.3) for _ in range(k)]
        old = [(sum(base[i] + rng.gauss(0, 0.4) for _ in range(n)), n) for i, n in enumerate(sizes)]
        new = [(sum(base[i] + rng.gauss(0, 0.4) for _ in range(n)), n) for i, n in enumerate(sizes)]
        _, low, high, _, _ = paired_difference(new, old)
        hits += low <= 0 <= high
    assert 0.91 <= hits / trials <= 0.985


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="paired units"):
        paired_difference([(1.0, 2)], [])
    with pytest.raises(ValueError, match="confidence"):
        paired_difference([(1.0, 2), (1.0, 2)], [(1.0, 2), (0.0, 2)], confidence=0.5)
