"""A before/after pair as hunks: the line diff, each change trimmed to its changed middle,
with offsets into the file as it evolves top to bottom. The replay types them; the
next-edit model (``specialists.tab.next_edit``) diffs a region's states with them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["Hunk", "hunks_of", "trim"]


@dataclass(frozen=True)
class Hunk:
    """One changed region: at ``start`` (an offset in the file as it is when the hunk begins,
    i.e. after the earlier hunks are done) ``old`` is deleted and ``new`` typed."""

    start: int
    old: str
    new: str


def trim(old: str, new: str) -> tuple[int, str, str]:
    """Strip the common prefix and suffix: only the changed middle is deleted and typed."""
    p = 0
    limit = min(len(old), len(new))
    while p < limit and old[p] == new[p]:
        p += 1
    s = 0
    while s < limit - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    return p, old[p : len(old) - s], new[p : len(new) - s]


def hunks_of(before: str, after: str) -> list[Hunk]:
    """The line-level diff as hunks with offsets into the evolving file, top to bottom."""
    a, b = before.splitlines(True), after.splitlines(True)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks: list[Hunk] = []
    shift = 0  # how much earlier hunks moved offsets
    line_offsets = [0]
    for ln in a:
        line_offsets.append(line_offsets[-1] + len(ln))
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        p, old_mid, new_mid = trim(old, new)
        if old_mid or new_mid:
            hunks.append(Hunk(start=line_offsets[i1] + shift + p, old=old_mid, new=new_mid))
        shift += len(new) - len(old)
    return hunks
