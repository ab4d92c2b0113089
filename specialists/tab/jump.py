"""When to show a jump: the next edit's location, decided apart from the policy (issue 15).

The policy (``policy.py``) picks among insertions and rewrites, or nothing. Only when it
picks nothing may a jump be shown (or, first, a rewrite right at the cursor: the shipped
policy never picks one, :func:`rewrite_at_cursor`), so the shipped policy stays valid and
its features are unchanged. A jump candidate (``context_copy.jump_candidates``) is shown when every gate
holds; the gates are what separated right jumps from wrong ones on the development
projects (attrs, click, flask, rich; BENCHMARKS "Jumps and per-kind figures"):

* it repeats the *latest* edit, and the cursor is where that edit's new text ends — the
  person has just made it (an older edit's text found elsewhere was never the next edit);
* the edit typed something, and the last character typed ends a word or a bracket
  (a trigger character or a blank there means the person is still typing);
* the cursor's line has balanced brackets (``foo(`` is half a change);
* the target lies below the cursor, at most ``max_lines`` lines away (tuned on dev; 0: off).

Microseconds a keystroke: a few ``str.find`` calls over the window; no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specialists.tab.context_copy import Jump, jump_candidates
from specialists.tab.features import Observation
from specialists.tab.replay import TRIGGER_CHARS, Suggestion, TabRequest

__all__ = ["JumpRule", "rewrite_at_cursor", "with_jumps"]

_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))


def _balanced(line: str) -> bool:
    return all(line.count(a) == line.count(b) for a, b in _PAIRS)


@dataclass(frozen=True)
class JumpRule:
    """Show the first jump candidate that passes the gates (module docstring)."""

    max_lines: int = 10**9
    """Farthest target, in lines below the cursor's line; 0 turns jumps off (the served
    default, ``specialist.JUMP_MAX_LINES``, is what the benchmark tuned on dev)."""

    def pick(self, req: TabRequest) -> Jump | None:
        if self.max_lines <= 0 or not req.recent_edits or not req.recent_edits[-1].new:
            return None
        file, cursor = req.file, req.cursor
        left = file[cursor - 1 : cursor]
        if not left or left in TRIGGER_CHARS or left.isspace():
            return None
        line_start = file.rfind("\n", 0, cursor) + 1
        line_end = file.find("\n", cursor)
        if not _balanced(file[line_start : len(file) if line_end < 0 else line_end]):
            return None
        for jump in jump_candidates(file, cursor, req.recent_edits[-1:]):
            if jump.at_edit_end and 0 <= jump.lines_away <= self.max_lines:
                return jump
        return None

    def suggestion(self, req: TabRequest) -> Suggestion | None:
        jump = self.pick(req)
        return None if jump is None else Suggestion(jump.start, jump.end, "", jump=True)


def rewrite_at_cursor(obs: Observation) -> Suggestion | None:
    """A next-edit rewrite of the text right at the cursor, repeating the latest edits
    (``context_copy.next_edit_candidates`` with distance 0). The shipped policy never picks
    rewrites; where it showed nothing on the dev project, 8 of 9 of these were accepted,
    and 0 of 18 that start further right (BENCHMARKS)."""
    for c in obs.candidates:
        if c.source == "next_edit" and c.distance == 0:
            return Suggestion(c.start, c.end, c.text)
    return None


def with_jumps(decide: Callable[..., Suggestion | None], rule: JumpRule, rewrites: bool = False
               ) -> Callable[..., Suggestion | None]:
    """``decide`` (a harness decider: request, observation) with, where it shows nothing, a
    rewrite at the cursor (``rewrites``) or else a jump."""
    def decide_or_jump(req: TabRequest, obs: Observation) -> Suggestion | None:
        return (decide(req, obs) or (rewrite_at_cursor(obs) if rewrites else None)
                or rule.suggestion(req))
    return decide_or_jump
