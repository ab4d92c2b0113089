"""Context copy: candidates taken from the text around the cursor, with no model.

The idea behind prompt-lookup decoding: find the longest suffix of the text just typed
(the left context) that occurs elsewhere — in the file, in the recent edits, in other open
files — and propose what follows that occurrence, to the end of its line and a few lines
more. ``CALIBRATION.md`` measured this as the strongest source by a factor of four in
characters saved.

Next-edit candidates repeat a recent edit: when the text a recent edit replaced occurs
again just right of the cursor, propose the same replacement there (a rename carried on).

Jump candidates (issue 15, Cursor's "tab to jump") name where the next edit will be when it
is beyond that region: the next occurrence, as a whole word, of the word a recent edit
replaced (a rename or a repeated change carried on further down, else from the top).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specialists.tab.types import RecentEdit

__all__ = ["Candidate", "copy_candidates", "next_edit_candidates", "region_end", "Source", "Jump", "jump_candidates",
           "replaced_word"]


@dataclass
class Candidate:
    """A suggestion before the policy decides how much of it to show.

    A completion inserts ``text`` at the cursor (``start == end == cursor``); a rewrite
    replaces ``[start, end)``.
    """

    text: str
    source: str  # "file", "edit", "open_file", "lm", "next_edit"
    start: int
    end: int
    match_len: int = 0
    votes: int = 1
    occurrences: int = 1
    distance: int = 0
    token_logprobs: list[float] = field(default_factory=list)
    token_ends: list[int] = field(default_factory=list)
    """Character offset in ``text`` where each scored token ends (LM scoring fills these)."""

    @property
    def is_rewrite(self) -> bool:
        return self.start != self.end or self.source == "next_edit"


@dataclass(frozen=True)
class Source:
    name: str
    text: str
    exclude_end: int = -1
    """An occurrence ending here is the cursor itself, not a copy."""
    origin: int = 0
    """Offset of ``text`` in the file, for the distance feature (file source only)."""


def _occurrence_ends(text: str, seed: str, exclude_end: int) -> list[int]:
    ends, i = [], text.find(seed)
    while i >= 0:
        e = i + len(seed)
        if e != exclude_end:
            ends.append(e)
        i = text.find(seed, i + 1)
    return ends


def _match_len(left: str, text: str, end: int, known: int, cap: int) -> int:
    """How far ``text[:end]`` and ``left`` agree backwards (at least ``known``)."""
    lo, hi = known, min(cap, end, len(left))
    while lo < hi:  # largest m in [lo, hi] with text[end-m:end] == left[-m:]
        mid = (lo + hi + 1) // 2
        if text[end - mid : end] == left[-mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _continuation(text: str, end: int, max_lines: int, max_chars: int) -> str:
    """What follows ``end``: the rest of its line and up to ``max_lines - 1`` more lines."""
    rest = text[end : end + max_chars]
    parts = rest.split("\n")
    if end + max_chars < len(text) and len(parts) > 1:
        parts = parts[:-1]  # drop a line cut short by max_chars
    n = max_lines + (1 if parts[0] == "" else 0)  # a match at a line end starts on the next
    return "\n".join(parts[:n])


def copy_candidates(left: str, sources: list[Source], cursor: int, *, min_match: int = 4,
                    max_candidates: int = 3, max_occurrences: int = 64, max_match: int = 256,
                    max_lines: int = 3, max_chars: int = 160) -> list[Candidate]:
    """Longest matches of the left context's suffix in ``sources``, continued from there.

    Distinct continuations are ranked by match length, then by how many occurrences agree,
    then by closeness to the cursor.
    """
    if len(left) < min_match:
        return []
    found: dict[str, Candidate] = {}
    first_line_votes: dict[str, int] = {}
    for src in sources:
        length = min_match
        ends = _occurrence_ends(src.text, left[-length:], src.exclude_end)
        # Many hits on a short seed: the longest matches are among a longer seed's hits.
        while len(ends) > max_occurrences and length * 2 <= min(len(left), max_match):
            longer = _occurrence_ends(src.text, left[-length * 2 :], src.exclude_end)
            if not longer:
                break
            length, ends = length * 2, longer
        if len(ends) > max_occurrences:
            ends = sorted(ends, key=lambda e: abs(src.origin + e - cursor))[:max_occurrences]
        for e in ends:
            cont = _continuation(src.text, e, max_lines, max_chars)
            if not cont.strip():
                continue
            m = _match_len(left, src.text, e, length, max_match)
            dist = abs(src.origin + e - cursor) if src.name == "file" else 0
            first = cont.split("\n", 1)[0]
            first_line_votes[first] = first_line_votes.get(first, 0) + 1
            seen = found.get(cont)
            if seen is None or (m, -dist) > (seen.match_len, -seen.distance):
                found[cont] = Candidate(text=cont, source=src.name, start=cursor, end=cursor,
                                        match_len=m, occurrences=len(ends), distance=dist)
    for cand in found.values():
        cand.votes = first_line_votes.get(cand.text.split("\n", 1)[0], 1)
    ranked = sorted(found.values(), key=lambda c: (-c.match_len, -c.votes, c.distance))
    return ranked[:max_candidates]


def _common_ends(old: str, new: str) -> tuple[int, int]:
    """How many characters ``old`` and ``new`` share at the start, and then at the end."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
        s += 1
    return p, s


def _trimmed(edit: RecentEdit) -> tuple[str, str]:
    old, new = edit.old, edit.new
    p, s = _common_ends(old, new)
    return old[p : len(old) - s], new[p : len(new) - s]


def region_end(file: str, cursor: int, lines: int) -> int:
    """Where the editable region ends: after the cursor's line and ``lines - 1`` more."""
    stop = cursor
    for _ in range(lines):
        nl = file.find("\n", stop)
        if nl < 0:
            return len(file)
        stop = nl + 1
    return stop


def next_edit_candidates(file: str, cursor: int, edits: list[RecentEdit], *, region_lines: int = 3,
                         max_candidates: int = 2, min_old: int = 2) -> list[Candidate]:
    """Rewrites of the editable region right of the cursor that repeat a recent edit."""
    region = file[cursor:region_end(file, cursor, region_lines)]
    out: list[Candidate] = []
    seen: set[tuple[int, str]] = set()
    for edit in reversed(edits):  # the most recent first
        old, new = _trimmed(edit)
        if len(old) < min_old or old == new:
            continue
        i = region.find(old)
        if i < 0 or (cursor + i, new) in seen:
            continue
        seen.add((cursor + i, new))
        out.append(Candidate(text=new, source="next_edit", start=cursor + i, end=cursor + i + len(old),
                             match_len=len(old), votes=region.count(old), distance=i))
        if len(out) >= max_candidates:
            break
    return out


@dataclass(frozen=True)
class Jump:
    """Where the next edit may be: the line region ``[start, end]`` of the file (its end is
    the line's end), holding an occurrence of ``term``, replaced by recent edit number
    ``edit_rank`` (0: the latest)."""

    start: int
    end: int
    term: str
    kind: str
    """``repeat`` (the edit's replaced text occurs there) or ``rename`` (its replaced word)."""
    edit_rank: int
    lines_away: int
    """Lines from the cursor's line to the target's (negative: above it, wrapped round)."""
    at_edit_end: bool
    """The cursor is where the edit's new text ends: the person has just made it."""


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def replaced_word(old: str, new: str) -> str:
    """The whole word(s) of ``old`` that the edit ``old`` → ``new`` changed: the changed
    middle widened to word boundaries in ``old`` ("" when that is not a word, or when it
    survives in ``new`` — then nothing was replaced, only added to)."""
    p, s = _common_ends(old, new)
    i, j = p, len(old) - s
    while i > 0 and _is_word(old[i - 1]):
        i -= 1
    while j < len(old) and _is_word(old[j]):
        j += 1
    term = old[i:j].strip()
    if "\n" in term or not term or not (_is_word(term[0]) and _is_word(term[-1])):
        return ""
    if _find_word(new, term, 0) >= 0:
        return ""
    return term


def _find_word(text: str, term: str, start: int, stop: int | None = None) -> int:
    """The first whole-word occurrence of ``term`` in ``text[start:stop]`` (-1: none)."""
    stop = len(text) if stop is None else stop
    i = text.find(term, start, stop)
    while i >= 0:
        j = i + len(term)
        if (i == 0 or not _is_word(text[i - 1])) and (j == len(text) or not _is_word(text[j])):
            return i
        i = text.find(term, i + 1, stop)
    return -1


def _line_at(file: str, i: int) -> tuple[int, int]:
    start = file.rfind("\n", 0, i) + 1
    end = file.find("\n", i)
    return start, len(file) if end < 0 else end


def jump_candidates(file: str, cursor: int, edits: list[RecentEdit], *, region_lines: int = 3,
                    max_candidates: int = 2, min_term: int = 3, min_repeat: int = 4,
                    max_edits: int = 3) -> list[Jump]:
    """Line regions beyond the editable region (the cursor's line and ``region_lines`` after
    it, where :func:`next_edit_candidates` rewrites) where a recent edit may be repeated:
    the next occurrence of the text it replaced (``repeat``, at least ``min_repeat``
    characters) or of the whole word it replaced (``rename``); below the cursor first, else
    the first from the top. The most recent edit first; one candidate per line."""
    lo = file.rfind("\n", 0, cursor) + 1
    hi = region_end(file, cursor, region_lines)
    out: list[Jump] = []
    seen: set[int] = set()
    for rank, edit in enumerate(reversed(edits[-max_edits:])):  # the most recent first
        old, new = _widened(file, edit)
        at_end = cursor == edit.offset + len(edit.new)
        for kind, term, whole in (("repeat", old.strip(), False), ("rename", replaced_word(old, new), True)):
            if len(term) < (min_repeat if kind == "repeat" else min_term) or "\n" in term:
                continue
            at, wrapped = _next_occurrence(file, term, whole, lo, hi)
            if at < 0:
                continue
            start, end = _line_at(file, at)
            if start in seen:
                continue
            seen.add(start)
            lines = file.count("\n", lo, start) if not wrapped else -file.count("\n", start, lo)
            out.append(Jump(start=start, end=end, term=term, kind=kind, edit_rank=rank,
                            lines_away=lines, at_edit_end=at_end))
            if len(out) >= max_candidates:
                return out
    return out


def _widened(file: str, edit: RecentEdit) -> tuple[str, str]:
    """The last line of the edit's old and new text, widened to whole words with the file
    around it when its new text is still where it was put: editors and the replay send the
    changed middle only (``foo_x`` → ``foo_y`` arrives as ``x`` → ``y``)."""
    lo, hi = edit.offset, edit.offset + len(edit.new)
    if not (0 <= lo <= hi <= len(file)) or file[lo:hi] != edit.new:
        return _trimmed(edit)
    a, b = lo, hi
    while a > 0 and _is_word(file[a - 1]):
        a -= 1
    while b < len(file) and _is_word(file[b]):
        b += 1
    old, new = file[a:lo] + edit.old + file[hi:b], file[a:b]
    return old[old.rfind("\n") + 1 :], new[new.rfind("\n") + 1 :]  # the cursor's line of it


def _next_occurrence(file: str, term: str, whole: bool, lo: int, hi: int) -> tuple[int, bool]:
    """The first occurrence of ``term`` at or after ``hi``, else the first before ``lo``
    (then ``wrapped``); -1 when there is none outside ``[lo, hi)``."""
    if whole:
        at = _find_word(file, term, hi)
        return (at, False) if at >= 0 else (_find_word(file, term, 0, lo), True)
    at = file.find(term, hi)
    if at >= 0:
        return at, False
    at = file.find(term, 0, lo)
    return (at, True) if at >= 0 and at + len(term) <= lo else (-1, True)
