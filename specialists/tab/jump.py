"""When to show a jump: the next edit's location, decided apart from the policy (issue 15).

The policy (``policy.py``) picks among insertions and rewrites, or nothing; it stays the
shipped one, its features unchanged. Around it (:func:`apply_rules`, for the harness's
:func:`with_jumps` and the served specialist alike): its insertion is held back where the
latest edit looks finished (:func:`held`); where it then shows nothing, a rewrite right at
the cursor (:func:`rewrite_at_cursor`), else a jump. A jump candidate
(``context_copy.jump_candidates``) is shown when every gate holds; the gates are what
separated right jumps from wrong ones on the development projects (attrs, click, flask,
rich; ``benchmarks/tab_jump_signals.py``, BENCHMARKS "Jumps and per-kind figures"):

* it repeats the *latest* edit, and the cursor is where that edit's new text ends — the
  person has just made it (older edits' text found elsewhere was not the next edit in a
  first look at those projects);
* the edit typed something, and the last character typed ends a word or a bracket
  (a trigger character or a blank there means the person is still typing);
* the cursor's line has balanced brackets (``foo(`` is half a change);
* the target lies below the cursor, at most ``max_lines`` lines away (tuned on dev; 0: off).

Microseconds a keystroke: a few ``str.find`` calls over the window; no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from specialists.tab.context_copy import Jump, jump_candidates
from specialists.tab.features import Observation
from specialists.tab.types import TRIGGER_CHARS, Suggestion, TabRequest

__all__ = ["JumpRule", "apply_rules", "edit_finished", "held", "rewrite_at_cursor", "with_jumps"]

_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))


def _balanced(line: str) -> bool:
    return all(line.count(a) == line.count(b) for a, b in _PAIRS)


def edit_finished(req: TabRequest) -> bool:
    """The latest edit looks finished: it typed something, the cursor is where its new text
    ends, the last character typed ends a word or bracket, and the cursor's line has
    balanced brackets (the jump rule's first gates, module docstring)."""
    if not req.recent_edits or not req.recent_edits[-1].new:
        return False
    edit, file, cursor = req.recent_edits[-1], req.file, req.cursor
    if cursor != edit.offset + len(edit.new):
        return False
    left = file[cursor - 1 : cursor]
    if not left or left in TRIGGER_CHARS or left.isspace():
        return False
    line_start = file.rfind("\n", 0, cursor) + 1
    line_end = file.find("\n", cursor)
    return _balanced(file[line_start : len(file) if line_end < 0 else line_end])


@dataclass(frozen=True)
class JumpRule:
    """Show the first jump candidate that passes the gates (module docstring)."""

    max_lines: int = 10**9
    """Farthest target, in lines below the cursor's line; 0 turns jumps off (the served
    default, ``specialist.JUMP_MAX_LINES``, is what the benchmark tuned on dev)."""

    def pick(self, req: TabRequest) -> Jump | None:
        if self.max_lines <= 0 or not edit_finished(req):
            return None
        for jump in jump_candidates(req.file, req.cursor, req.recent_edits[-1:]):
            if jump.at_edit_end and 0 <= jump.lines_away <= self.max_lines:
                return jump
        return None

    def suggestion(self, req: TabRequest) -> Suggestion | None:
        jump = self.pick(req)
        return None if jump is None else Suggestion(jump.start, jump.end, "", jump=True)


def rewrite_at_cursor(obs: Observation) -> Suggestion | None:
    """A next-edit rewrite of the text right at the cursor, repeating the latest edits
    (``context_copy.next_edit_candidates`` with distance 0). The shipped policy never picks
    rewrites; shown where it shows nothing, these raised the dev project's reward per
    request (BENCHMARKS, "Jumps and per-kind figures"); those starting further right were
    never accepted there."""
    for c in obs.candidates:
        if c.source == "next_edit" and c.distance == 0:
            return Suggestion(c.start, c.end, c.text)
    return None


def held(suggestion: Suggestion | None, req: TabRequest) -> bool:
    """An insertion where the latest edit looks finished: the person is about to move on
    (the shipped policy was trained without requests at the end of an edit, where every
    insertion is rejected; holding these back raised the dev reward, BENCHMARKS)."""
    return suggestion is not None and suggestion.kind == "insert" and edit_finished(req)


def apply_rules(sug: Suggestion | None, req: TabRequest, obs: Observation, rule: JumpRule,
                rewrites: bool = False, hold: bool = False, next_edit: Any = None
                ) -> tuple[Suggestion | None, str | None, str]:
    """What is shown around the policy's ``sug``: with ``hold``, an insertion :func:`held`
    back; where nothing is left, a rewrite at the cursor (``rewrites``), else the next-edit
    model's change to the editable region (``next_edit``: a
    :class:`~specialists.tab.next_edit.NextEditModel`), else a jump.
    Returns (what is shown or None, the rule that decided it — ``rewrite``, ``model``,
    ``jump``, ``held`` — or None where the policy's own choice stands, the rule's ``source``)."""
    held_back = hold and held(sug, req)
    if sug is not None and not held_back:
        return sug, None, ""
    if rewrites and (rewrite := rewrite_at_cursor(obs)) is not None:
        return rewrite, "rewrite", "next_edit"
    if next_edit is not None and (region := next_edit.suggest(req)) is not None:
        return region, "model", "next_edit_model"
    if (jump := rule.pick(req)) is not None:
        return Suggestion(jump.start, jump.end, "", jump=True), "jump", jump.kind
    return None, "held" if held_back else None, ""


def with_jumps(decide: Callable[..., Suggestion | None], rule: JumpRule, rewrites: bool = False,
               hold: bool = False, next_edit: Any = None) -> Callable[..., Suggestion | None]:
    """``decide`` (a harness decider: request, observation) with :func:`apply_rules` around it."""
    def decide_or_jump(req: TabRequest, obs: Observation) -> Suggestion | None:
        return apply_rules(decide(req, obs), req, obs, rule, rewrites, hold, next_edit)[0]
    return decide_or_jump
