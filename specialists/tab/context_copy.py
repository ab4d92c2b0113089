"""Context copy: candidates taken from the text around the cursor, with no model.

The idea behind prompt-lookup decoding: find the longest suffix of the text just typed
(the left context) that occurs elsewhere — in the file, in the recent edits, in other open
files — and propose what follows that occurrence, to the end of its line and a few lines
more. ``CALIBRATION.md`` measured this as the strongest source by a factor of four in
characters saved.

Next-edit candidates repeat a recent edit: when the text a recent edit replaced occurs
again just right of the cursor, propose the same replacement there (a rename carried on).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specialists.tab.replay import RecentEdit

__all__ = ["Candidate", "copy_candidates", "next_edit_candidates", "Source"]


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


def _trimmed(edit: RecentEdit) -> tuple[str, str]:
    old, new = edit.old, edit.new
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
        s += 1
    return old[p : len(old) - s], new[p : len(new) - s]


def next_edit_candidates(file: str, cursor: int, edits: list[RecentEdit], *, region_lines: int = 3,
                         max_candidates: int = 2, min_old: int = 2) -> list[Candidate]:
    """Rewrites of the editable region right of the cursor that repeat a recent edit."""
    stop = cursor
    for _ in range(region_lines):
        nl = file.find("\n", stop)
        if nl < 0:
            stop = len(file)
            break
        stop = nl + 1
    region = file[cursor:stop]
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
