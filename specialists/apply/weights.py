"""The gap search's scores (``Weights``) and what deleting original lines costs under them:
below every step of a reading, so the reading's state (``reading``) and the steps can all
use them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

__all__ = ["DEFAULT_WEIGHTS", "Weights", "deletion_costs"]


@dataclass(frozen=True)
class Weights:
    """The gap DP's scores. ``merge`` also runs perturbed copies: a placement that changes
    when a weight moves a little was a near tie, and a near tie is a guess (abstain)."""

    boundary: float = 10.0  # a block's first/last non-blank line next to a marker: its anchor
    blank_edge: float = 3.0  # a blank first/last line of a block: a weak anchor
    blank_run: float = 0.5  # another blank line of that edge run
    middle: float = 0.1  # any other line: matching it must never pay for deleting one
    diag: float = 0.05  # consecutive sketch lines on consecutive original lines
    delete: float = 0.2  # per original non-blank line a block deletes by context
    delete_blank: float = 0.05
    indent: float = 0.3  # the line's indentation disagrees with the sketch's


DEFAULT_WEIGHTS = Weights()


def deletion_costs(okeys: list[str], wt: Weights) -> list[float]:
    """Prefix sums of what deleting each original line costs (a blank line costs less)."""
    cost = {True: wt.delete, False: wt.delete_blank}
    return list(accumulate(map(cost.__getitem__, map(bool, okeys)), initial=0.0))
