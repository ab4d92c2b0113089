"""Edit replay and the simulated user.

A real before/after pair is replayed as a person makes it: hunk by hunk, top to bottom,
the person moves the cursor to the hunk, deletes what goes, then types what comes one
character at a time. A request (a :class:`TabRequest`) is made

* when the cursor arrives at a hunk that replaces or deletes text (before deleting: a
  next-edit rewrite can do the whole hunk),
* right after the deletion, and
* while typing, at each trigger point: after a word-boundary character (space ``.`` ``(``
  ``_`` ``=`` ``,`` ``[`` ``{`` ``:``) and at the first non-blank character of a line — the
  protocol of ``CALIBRATION.md``.

The simulated user answers a shown :class:`Suggestion` (replace ``[start, end)`` of the
current file by ``text``). It accepts when applying it moves the file along the real path:
the result equals a later state of the replay within the current hunk (for a completion:
the inserted text is a prefix of what the person was about to type; for a rewrite: the
region's real next state) and some typed character is not blank. On accept it skips ahead
past what was accepted and asks again at once; characters it did not type are counted.

With ``ask_after_edit`` (issue 15) a request is also made when a hunk is done, the cursor
at its end: where an editor would predict the *next* edit's location. A jump (a
:class:`Suggestion` with ``jump=True`` naming a line region) is accepted only there, and
only when the person's next edit — the next hunk's first changed character — lies in the
region; at any other request the person's next edit is where the cursor is, so a jump is
rejected. An accepted jump types nothing (0 characters saved) and replaces the move to
the next hunk by the accept keystroke; :class:`Outcome` names each suggestion's ``kind``
(``insert``, ``rewrite``, ``jump``) for the per-kind figures. There, too, a rewrite is
accepted when its result is the file with the *next* hunk made, whole (the next-edit
model's answer, ``specialists.tab.next_edit``): the person skips the move and the typing,
the hunk's typed characters count as saved, and the replay goes on after that hunk.

That judgement is an oracle's. With a ``person`` (``specialists.tab.users``, issue 35) a
simulated person acts on it: dismisses a correct suggestion (too long, typing fast, noise),
takes only its first word or line, accepts a wrong one and undoes it (the file is as
before; the outcome says ``accepted`` with ``undone_after``, as the editor saw the accept
key), or has Tab switched off. While it is off (:attr:`Session.tab_off`) the editor asks
nothing: a driver answers ``respond(None)`` without asking the policy, and the person counts
down. A person's ``typing`` trait sets the clock's seconds per character. Without a person,
nothing changes.

This module is a library on purpose: the benchmark and the RL trainer drive it in process,
and an online loop can drive the HTTP API with :meth:`Session.next_request` /
:meth:`Session.respond` (requests serialise with :meth:`TabRequest.to_json`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Iterator

from specialists.tab.data import Pair
from specialists.tab.hunks import hunks_of
from specialists.tab.types import TRIGGER_CHARS, RecentEdit, Suggestion, TabRequest

__all__ = ["Outcome", "RewardConfig", "Timing", "Session", "replay_text"]

MADE_NEXT = -2  # ``Session.judge``'s k for a rewrite that made the next hunk whole


@dataclass(frozen=True)
class RewardConfig:
    """Reward per request: +0.75 accepted, −0.25 rejected, 0 when nothing is shown (Cursor's
    figures). ``per_char`` > 0 adds a bonus that scales with the accepted characters."""

    accept: float = 0.75
    reject: float = -0.25
    none: float = 0.0
    per_char: float = 0.0
    per_char_cap: int = 80

    def __call__(self, shown: bool, accepted: bool, chars: int = 0) -> float:
        if not shown:
            return self.none
        if not accepted:
            return self.reject
        return self.accept + self.per_char * min(chars, self.per_char_cap)

    def score(self, outcome: "Outcome") -> float:
        """The reward of an :class:`Outcome` (a wrong accept counts as an accept: it is the key)."""
        return self(outcome.shown, outcome.accepted, outcome.chars_saved)


@dataclass(frozen=True)
class Timing:
    """The simulated person's clock: typing speed and pauses, in seconds."""

    per_char: float = 0.18
    move_to_hunk: float = 2.0
    delete: float = 0.6
    accept: float = 0.3
    read_suggestion: float = 0.4


@dataclass
class Outcome:
    shown: bool
    accepted: bool
    chars_saved: int
    reward: float
    kind: str | None = None
    """The shown suggestion's :attr:`Suggestion.kind`; ``None`` when nothing was shown."""
    chars_kept: int = 0
    """Accepted characters left in the file (a partial accept's part; a wrong accept's text
    until it is undone)."""
    undone_after: int | None = None
    """A wrong accept (a simulated person's noise): undone this many keystrokes later."""
    switched_off: bool = False
    """The person switched Tab off after this answer (``users`` patience)."""
    off: bool = False
    """Tab was off: the suggestion never reached the person (``shown`` is False)."""


def _triggers(new: str) -> list[int]:
    """Offsets ``k`` into the typed text at which a request is made (see module docstring)."""
    ks = []
    for k in range(1, len(new) + 1):
        ch = new[k - 1]
        if ch in TRIGGER_CHARS and ch != " ":
            ks.append(k)
        elif ch == " " and (k == len(new) or new[k] != " "):
            ks.append(k)  # after a run of spaces, not inside indentation
        elif ch not in " \t" and k >= 1:
            # first non-blank character of a line: request before typing it
            line_start = new.rfind("\n", 0, k - 1) + 1
            if new[line_start : k - 1].strip(" \t") == "" and (k - 1 > line_start or
                                                               new[k - 2 : k - 1] == "\n"):
                ks.append(k - 1)
    return sorted(set(k for k in ks if k < len(new)))


def replay_text(pair: Pair) -> str:
    """Apply every hunk as the person would; equals ``pair.after`` (tested)."""
    text = pair.before
    for h in hunks_of(pair.before, pair.after):
        assert text[h.start : h.start + len(h.old)] == h.old, "hunk does not match the file"
        text = text[: h.start] + text[h.start + len(h.old) :]
        for k in range(len(h.new)):
            text = text[: h.start + k] + h.new[k] + text[h.start + k :]
    return text


class Session:
    """One replayed edit with its simulated user.

    Drive it as ``while (req := s.next_request()) is not None: s.respond(suggestion)``; a
    request must be answered before the next one is asked for.
    """

    def __init__(self, pair: Pair, reward: Any = None, timing: Timing | None = None,
                 max_recent: int = 5, ask_after_edit: bool = False, person: Any = None) -> None:
        self.pair = pair
        self.person = person
        """A :class:`specialists.tab.users.Person` who acts on the judgement; None: the oracle."""
        self.ask_after_edit = ask_after_edit
        self.reward = reward or RewardConfig()
        """Anything with ``score(outcome)``: :class:`RewardConfig` or ``users.KeptReward``."""
        self.timing = timing or Timing()
        if person is not None and "typing" in getattr(person, "traits", {}):
            self.timing = replace(self.timing, per_char=float(person.traits["typing"]["per_char"]))
        self.max_recent = max_recent
        self.hunks = hunks_of(pair.before, pair.after)
        self.file = pair.before
        self.recent: list[RecentEdit] = []
        self.clock = 0.0
        self.last_decision: float | None = None
        self.last_outcome: str | None = None
        self.total_chars = sum(len(h.new) for h in self.hunks)  # what one types unaided
        self.typed_chars = 0  # what the person did type
        self.saved_chars = 0
        self._deleted = False
        self._k = 0
        self._steps = self._walk()
        self._pending: tuple[int, int, str] | None = None  # (hunk index, k or -1, file) asked
        self._skip_to: int | None = None
        self._after = False  # the pending request is the one made when a hunk is done
        self._jumped = False  # an accepted jump took the cursor to the next hunk
        self._made_next = False  # an accepted rewrite made the next hunk whole
        self.jumps_accepted = 0
        self._n = 0
        self._since: float | None = None

    # -- the person's path -------------------------------------------------------------
    def _walk(self) -> Iterator[tuple[int, int]]:
        """Yield (hunk index, k) at each request; k = -1 is before the deletion."""
        for hi, h in enumerate(self.hunks):
            if not self._jumped:  # an accepted jump did the move (its keystroke is counted)
                self.clock += self.timing.move_to_hunk
            self._jumped = False
            self._deleted, self._k, self._skip_to = False, 0, None
            if self._made_next:  # an accepted rewrite made it whole: on to the request after it
                self._made_next = False
                self._delete(hi)
                self._set_k(hi, len(h.new))
                yield from self._done(hi)
                continue
            if h.old:
                yield hi, -1
                if self._skip_to is not None:  # an accepted rewrite did (part of) the hunk
                    yield from self._type(hi, self._skip_to)
                    continue
                self.clock += self.timing.delete
            self._delete(hi)
            yield from self._type(hi, 0, ask_first=True)

    def _delete(self, hi: int) -> None:
        h = self.hunks[hi]
        if not self._deleted:
            self.file = self.file[: h.start] + self.file[h.start + len(h.old) :]
            self._deleted = True

    def _type(self, hi: int, k0: int, ask_first: bool = False) -> Iterator[tuple[int, int]]:
        h = self.hunks[hi]
        self._delete(hi)
        triggers = _triggers(h.new)
        self._set_k(hi, k0)
        if ask_first and not h.new and self.ask_after_edit:
            pass  # a pure deletion is done once deleted: the request below is the one
        elif ask_first or (k0 > 0 and k0 < len(h.new)):
            yield hi, k0
        k = self._k
        while k < len(h.new):
            nxt = next((t for t in triggers if t > k), len(h.new))
            self.typed_chars += nxt - k
            self.clock += self.timing.per_char * (nxt - k)
            self._set_k(hi, nxt)
            if nxt < len(h.new):
                yield hi, nxt
            k = self._k  # an accept may have moved it on
        yield from self._done(hi)

    def _done(self, hi: int) -> Iterator[tuple[int, int]]:
        """Hunk ``hi`` is made: it joins the recent edits, and (``ask_after_edit``) the
        person is asked once more, the cursor at its end."""
        self._finish_hunk(hi)
        if self.ask_after_edit:
            self._after = True
            yield hi, len(self.hunks[hi].new)
            self._after = False

    def _set_k(self, hi: int, k: int) -> None:
        h = self.hunks[hi]
        self.file = self.file[: h.start] + h.new[:k] + self.file[h.start + self._k :]
        self._k = k

    def _finish_hunk(self, hi: int) -> None:
        h = self.hunks[hi]
        self.recent = (self.recent + [RecentEdit(old=h.old, new=h.new, offset=h.start)])[-self.max_recent :]

    def _path_state(self, hi: int, k: int) -> str:
        h = self.hunks[hi]
        deleted = self.file if self._deleted else self.file[: h.start] + self.file[h.start + len(h.old) :]
        if self._deleted:
            deleted = deleted[: h.start] + deleted[h.start + self._k :]
        return deleted[: h.start] + h.new[:k] + deleted[h.start :]

    # -- the request/response protocol -------------------------------------------------
    @property
    def tab_off(self) -> bool:
        """The person has Tab switched off: the editor makes no request (answer the pending
        one with ``respond(None)`` without asking the policy; it is not a request)."""
        return self.person is not None and self.person.off_left > 0

    def next_request(self) -> TabRequest | None:
        if self._pending is not None:
            raise RuntimeError("answer the last request (respond) before asking for the next")
        try:
            hi, k = next(self._steps)
        except StopIteration:
            return None
        h = self.hunks[hi]
        cursor = h.start + max(k, 0)
        recent = list(self.recent)
        if self._deleted and h.old and not self._after:  # the hunk in progress
            recent = (recent + [RecentEdit(old=h.old, new=h.new[: max(k, 0)], offset=h.start)])[-self.max_recent :]
        self._pending = (hi, k, self.file)
        self._n += 1
        since = None if self.last_decision is None else round(self.clock - self.last_decision, 3)
        self._since = since
        return TabRequest(file=self.file, cursor=cursor, language=self.pair.language, path=self.pair.path,
                          recent_edits=recent, seconds_since_last=since, last_outcome=self.last_outcome,
                          request_id=f"{self.pair.repo}:{self.pair.commit[:8]}:{self._n}")

    def judge(self, suggestion: Suggestion | None) -> tuple[bool, int]:
        """(accepted, k reached) for a suggestion on the pending request, without acting."""
        if self._pending is None:
            raise RuntimeError("no pending request")
        if suggestion is None:
            return False, -1
        hi, k, file = self._pending
        h = self.hunks[hi]
        if not (0 <= suggestion.start <= suggestion.end <= len(file)):
            return False, -1
        if suggestion.jump:
            return self._judge_jump(hi, suggestion), -1
        result = suggestion.apply(file)
        if self._after:
            return self._judge_next_hunk(hi, result), MADE_NEXT
        base = len(file) - (len(h.old) if not self._deleted else 0) - max(k, 0)
        k2 = len(result) - base
        if k2 <= max(k, 0) and not (k == -1 and k2 == 0 and not h.new):
            return False, -1
        if k2 > len(h.new):
            return False, -1
        if result != self._path_state(hi, k2):
            return False, -1
        if h.new and not h.new[max(k, 0) : k2].strip():
            return False, -1  # nothing but blanks: not worth a tab
        return True, k2

    @property
    def place(self) -> int:
        """Which hunk the pending request is typed in (the place :meth:`remaining` is the rest
        of)."""
        if self._pending is None:
            raise RuntimeError("no pending request")
        return self._pending[0]

    def next_edit_at(self) -> int | None:
        """Where the person's next edit elsewhere begins, at a request made when a hunk is
        done: the next hunk's first changed character (None: not such a request, or the
        last hunk)."""
        if self._pending is None:
            raise RuntimeError("no pending request")
        hi = self._pending[0]
        if not self._after or hi + 1 >= len(self.hunks):
            return None
        return self.hunks[hi + 1].start  # offsets already count the hunks done before it

    def _judge_next_hunk(self, hi: int, result: str) -> bool:
        """At a request made when hunk ``hi`` is done: does ``result`` make the next hunk, whole?"""
        if hi + 1 >= len(self.hunks):
            return False
        nh = self.hunks[hi + 1]
        made = self.file[: nh.start] + nh.new + self.file[nh.start + len(nh.old):]
        return result == made and bool(nh.new.strip() or nh.old.strip())

    def _judge_jump(self, hi: int, suggestion: Suggestion) -> bool:
        at = self.next_edit_at()
        return at is not None and suggestion.start <= at <= suggestion.end

    def respond(self, suggestion: Suggestion | None) -> Outcome:
        """The simulated user's answer to the pending request; on accept, skip ahead."""
        accepted, k2 = self.judge(suggestion)
        hi, k, _ = self._pending  # type: ignore[misc]
        self._pending = None
        shown = suggestion is not None
        verdict = None
        if self.person is not None and suggestion is not None:
            verdict = self._react(suggestion, accepted, hi, k, k2)
            shown = verdict.seen
            if verdict.accepted and verdict.undone_after is None and not accepted:
                accepted, k2 = True, k + verdict.keep  # the right first word of a wrong line
            elif accepted and verdict.accepted and k >= 0 and k2 >= 0 and verdict.keep < k2 - k:
                k2 = k + verdict.keep  # a partial accept: the rest is typed by hand
            if not verdict.accepted or verdict.undone_after is not None:
                accepted = False
        elif self.person is not None:
            self.person.idle()
        chars = 0
        if accepted and suggestion is not None and suggestion.jump:
            self.jumps_accepted += 1
            self.clock += self.timing.accept
            self._jumped = True
        elif accepted and k2 == MADE_NEXT:
            nh = self.hunks[hi + 1]
            chars = len(nh.new)
            self.saved_chars += chars
            self.clock += self.timing.accept
            self._jumped = self._made_next = True  # the replay makes it next (``_walk``)
        elif accepted:
            chars = k2 - max(k, 0)
            self.saved_chars += chars
            self.clock += self.timing.accept
            if k == -1:
                self._skip_to = k2
            else:
                self._set_k(hi, k2)
        elif shown:
            self.clock += self.timing.read_suggestion
        wrong = verdict is not None and verdict.seen and verdict.accepted and verdict.undone_after is not None
        if wrong:  # accepted, then undone: the file is as before, the keys are spent
            self.clock += 2 * self.timing.accept
        out = Outcome(shown=shown, accepted=accepted or wrong, chars_saved=chars, reward=0.0,
                      kind=suggestion.kind if suggestion is not None and shown else None,
                      chars_kept=len(suggestion.text) if wrong and suggestion is not None else chars,
                      undone_after=verdict.undone_after if wrong and verdict is not None else None,
                      switched_off=verdict is not None and verdict.switched_off,
                      off=verdict is not None and not verdict.seen)
        self.last_outcome = "accepted" if out.accepted else ("rejected" if shown else "none")
        self.last_decision = self.clock
        out.reward = self.reward.score(out)
        return out

    def _react(self, suggestion: Suggestion, correct: bool, hi: int, k: int, k2: int) -> Any:
        """The person's verdict on a shown suggestion; only a completion typed at the cursor
        can be taken in part."""
        h = self.hunks[hi]
        partial = correct and not suggestion.jump and k >= 0 and k2 >= 0
        typed = h.new[k:k2] if partial else None
        at_cursor = (not correct and suggestion.kind == "insert" and k >= 0 and not self._after
                     and self._deleted and suggestion.start == h.start + k)
        right = os.path.commonprefix([suggestion.text, h.new[k:]]) if at_cursor else ""
        return self.person.react(correct, typed, suggestion.text, self.pair.language, self._since, right)

    # -- what the person was about to do (for analysis and tests, never for the policy) -----
    def remaining(self) -> str:
        """The rest of the current hunk's typed text at the pending request."""
        if self._pending is None:
            raise RuntimeError("no pending request")
        hi, k, _ = self._pending
        return self.hunks[hi].new[max(k, 0) :]
