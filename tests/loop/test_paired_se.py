"""The paired, edit-clustered reading of a gain (issue 15; the gate's
:func:`~specialists.tab.loop.gate.paired_se`, which ``benchmarks/loop_learn.py`` reports as
``paired_gain`` / ``paired_se``): two versions replay the same edits, so what they do alike
cancels, and an edit's many requests count as one unit, not as independent draws."""

from __future__ import annotations

import math
import random

import pytest

from specialists.tab.loop.gate import paired_se


def _edits(rewards: list[list[float]]) -> list[tuple[float, int]]:
    return [(sum(rs), len(rs)) for rs in rewards]


def paired_gain(before: list[tuple[float, int]] | None,
                after: list[tuple[float, int]]) -> tuple[float, float]:
    """(gain, se); no ``before``: every edit (0, 0) there, the clustered se of one mean."""
    gain, se, _, _ = paired_se(after, before if before is not None else [(0.0, 0)] * len(after))
    return gain, se


def test_a_version_measured_against_itself_gains_nothing_with_no_error() -> None:
    rng = random.Random(0)
    a = _edits([[rng.choice([0.75, -0.25, 0.0]) for _ in range(rng.randint(1, 30))] for _ in range(40)])
    gain, se = paired_gain(a, a)
    assert gain == 0.0 and se == 0.0


def test_a_change_on_one_edit_is_the_only_error() -> None:
    # the same edits, and one request of one edit turns a rejection into an accept
    base = [[-0.25, 0.0, 0.75]] * 20
    after = [list(rs) for rs in base]
    after[3] = [0.75, 0.0, 0.75]
    gain, se = paired_gain(_edits(base), _edits(after))
    assert gain == pytest.approx(1.0 / 60)
    # 20 edits, one moved: the delta method's SE of that one-edit change
    z = [(1.0 - 1.0 / 60 * 3) / 60] + [(-1.0 / 60 * 3) / 60] * 19
    assert se == pytest.approx(math.sqrt(20 / 19 * sum(v * v for v in z)))
    assert gain < 2 * se  # one edit of 20 moving is no evidence


def test_without_a_before_it_is_the_clustered_error_of_one_mean() -> None:
    # requests alike within an edit: the per-request SE would be far too small
    edits = [[0.75] * 50 if e % 2 else [-0.25] * 50 for e in range(10)]
    flat = [r for rs in edits for r in rs]
    mean = sum(flat) / len(flat)
    per_request = math.sqrt(sum((r - mean) ** 2 for r in flat) / (len(flat) - 1) / len(flat))
    ratio, clustered = paired_gain(None, _edits(edits))
    assert ratio == pytest.approx(0.25)
    assert clustered > 5 * per_request


def test_one_edit_has_no_error_estimate() -> None:
    gain, se = paired_gain([(1.0, 2)], [(2.0, 2)])
    assert gain == 0.5 and se == math.inf
