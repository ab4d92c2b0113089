"""How alike two lines are: the similarity search the fuzzy placement of a floating block
and the deletion check's "the new lines rewrite the old ones" both use."""

from __future__ import annotations

import difflib

import numpy as np
from rapidfuzz import process as _rf_process
from rapidfuzz.distance import Indel as _rf_indel

__all__ = ["rewrites", "similarities"]

_DIFFLIB_CHARS = 800  # longer pairs of lines are compared by LCS ratio only


def similarities(key: str, lines: list[str], lo: int, hi: int, threshold: float,
                 exact: bool = False) -> list[tuple[float, int]]:
    """(similarity, index) of the non-blank lines in ``lines[lo:hi]`` at least ``threshold``
    similar to ``key``: 2·LCS / (both lengths), rapidfuzz's Indel similarity, in C.

    ``exact``: difflib's ratio instead (a heuristic lower bound of that, which the fuzzy
    placement's rival margins were tuned on), where the LCS ratio reaches the threshold and
    the two lines are not long (difflib took over a second on one 5,600-character line)."""
    if hi <= lo or not key:
        return []
    scores = _rf_process.cdist([key], lines[lo:hi], scorer=_rf_indel.normalized_similarity,
                               score_cutoff=threshold - 1e-6, workers=1)[0]  # float rounding
    found = [(float(scores[i]), lo + int(i)) for i in np.flatnonzero(scores) if lines[lo + int(i)]]
    if not exact:
        return found
    matcher = difflib.SequenceMatcher(None, "", key, autojunk=False)  # b: the cached side
    out = []
    for score, p in found:
        if len(key) + len(lines[p]) <= _DIFFLIB_CHARS:
            matcher.set_seq1(lines[p])
            score = matcher.ratio()
        if score >= threshold:
            out.append((score, p))
    return out


def rewrites(new: list[str], old: list[str]) -> bool:
    """Whether every old line is similar to one of the new lines (similarity >= 0.6): a
    modification."""
    if not old or len(old) > len(new) or len(old) > 40:
        return False
    return all(similarities(line, new, 0, len(new), 0.6) for line in old)
