"""Rewards of what a person kept (issue 35), apart from the simulated people who earn them:
the live event store scores logged events with :class:`KeptReward` too, and the serving
path never imports the simulator (`specialists.tab.users`), which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["KeptReward", "per_ask"]


@dataclass(frozen=True)
class KeptReward:
    """Reward of what was kept: ``per_char`` per accepted character still present after
    ``window`` keystrokes (a wrong accept undone sooner keeps none), ``dismiss`` for a shown
    suggestion the person dismissed, ``undo`` for a wrong accept undone, ``off`` when the
    person switches Tab off. Nothing shown (or Tab off) is ``none``."""

    per_char: float = 0.1
    dismiss: float = -0.25
    undo: float = -0.5
    off: float = -2.0
    none: float = 0.0
    window: int = 20

    def score(self, outcome: Any) -> float:
        """An outcome's reward. Its horizon is ``window``: an undo later than that is not
        seen (the characters count as kept, with no undo cost), as an editor that reports
        what is left ``window`` keystrokes after the accept does not see it either
        (:meth:`of_event`, the live loop's)."""
        r = self.none
        if outcome.shown:
            if not outcome.accepted:
                r = self.dismiss
            elif outcome.undone_after is not None and outcome.undone_after <= self.window:
                r = self.undo
            r += self.per_char * self.kept(outcome)
        if outcome.switched_off:
            r += self.off
        return r

    def of_event(self, event: Any) -> float:
        """A logged event's kept reward (the live loop's, from ``/v1/feedback``): a
        :class:`~specialists.tab.events.LabelledEvent` whose final report, when the editor
        sent one, says what was kept, undone or switched off; without one an accept keeps
        what was accepted. What a rule showed in the policy's place scores ``none``."""
        if not event.credited:
            return self.none
        accepted = event.outcome in ("accepted", "partial")
        if not accepted:
            r = self.dismiss
        elif event.undone:
            r = self.undo
        else:
            kept = event.chars_accepted if event.chars_kept is None else event.chars_kept
            r = self.per_char * kept
        return r + (self.off if event.switched_off else 0.0)

    def kept(self, outcome: Any) -> int:
        """Accepted characters still there after ``window`` keystrokes."""
        if outcome.undone_after is not None and outcome.undone_after <= self.window:
            return 0
        return int(outcome.chars_kept)


def per_ask(rewards: Sequence[float], not_asked: int) -> tuple[float, float]:
    """Reward per request *asked* and its standard error: the mean of ``rewards`` (the
    requests made) with ``not_asked`` more requests at 0 — those the editor did not make
    while the person had Tab switched off. Reward per request leaves those out, so a policy
    that drives someone to switch Tab off loses their later (often negative) requests from
    its denominator, and one that keeps them on gains them back; this reading does not move
    with how many requests a policy leaves to be made."""
    import math

    n = len(rewards) + not_asked
    if n == 0:
        return 0.0, 0.0
    mean = sum(rewards) / n
    var = max(0.0, sum(r * r for r in rewards) - n * mean * mean) / max(1, n - 1)
    return mean, math.sqrt(var / n)
