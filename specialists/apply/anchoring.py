"""Anchoring, the piecewise reading's first step: the skeleton of certain matches.

Lines unique in both the original and the sketch (and not trivial: see ``weak``) are
chained by a heaviest increasing subsequence, a weighted patience diff in which a block's
edge lines next to a marker weigh most; each match is then extended line by line to equal
neighbours. Pure string and hash-map work. What lies between two anchors is left to the gap
search (``gap_search``). Also here: the sketch's uniform indentation shift, and whether it
copies the file's indentation bytes, both read off the anchors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from specialists.apply.markers import LineKind
from specialists.apply.result import ReadAgain

if TYPE_CHECKING:
    from specialists.apply.reading import Reading

__all__ = ["check_dropped_anchors", "estimate_shift", "extend", "faithful_indentation",
           "heaviest_chain", "unique_pairs", "weak"]


def weak(key: str) -> bool:
    """Lines too common to anchor on alone: braces, ``else:``, ``return``..."""
    return len(key) <= 4 or not any(map(str.isalnum, key))


def unique_pairs(merger: Reading) -> list[tuple[int, int]]:
    """(sketch line, original line) for every line found once in each and not trivial;
    also counts the sketch's code lines (``scount``)."""
    sk, pos = merger.sk, merger.pos
    counts: dict[str, int] = {}
    for j, key in enumerate(sk.keys):
        if sk.kinds[j] == LineKind.CODE and key:
            counts[key] = counts.get(key, 0) + 1
    merger.scount = counts
    return [(j, pos[key][0]) for j, key in enumerate(sk.keys)
            if key and counts.get(key) == 1 and sk.kinds[j] == LineKind.CODE
            and not weak(key) and len(pos.get(key, ())) == 1 and j not in merger.new_lines]


def heaviest_chain(pairs: list[tuple[int, int, float]], n: int) -> list[tuple[int, int]]:
    """Heaviest subsequence of (j, p, weight) triples (sorted by j) with increasing p.

    A weighted patience diff: a block's edge lines weigh more than its middle lines, so a
    few copy-pasted lines in new code cannot outvote the context line that anchors it.
    Fenwick tree over p for prefix maxima: O(r log n).
    """
    size = n + 1
    tree_w = [0.0] * (size + 1)
    tree_i = [-1] * (size + 1)
    best = [0.0] * len(pairs)
    prev = [-1] * len(pairs)
    for i, (_, p, w) in enumerate(pairs):
        k, top, arg = p, 0.0, -1  # prefix max over positions < p (1-based p)
        while k > 0:
            if tree_w[k] > top:
                top, arg = tree_w[k], tree_i[k]
            k -= k & -k
        best[i], prev[i] = top + w, arg
        k = p + 1
        while k <= size:
            if best[i] > tree_w[k]:
                tree_w[k], tree_i[k] = best[i], i
            k += k & -k
    if not pairs:
        return []
    i = max(range(len(pairs)), key=best.__getitem__)
    out: list[tuple[int, int]] = []
    while i >= 0:
        out.append((pairs[i][0], pairs[i][1]))
        i = prev[i]
    out.reverse()
    return out


def check_dropped_anchors(merger: Reading, pairs: list[tuple[int, int, float]],
                          skeleton: list[tuple[int, int]]) -> None:
    """A block's edge line next to a marker, found once in the original and once in the
    sketch, left out of the chain: the other anchors put the block somewhere this line
    says it is not (new code copying old lines, usually). The sketch contradicts itself."""
    kept = {j for j, _ in skeleton}
    for j, _, weight in pairs:
        if weight >= merger.wt.boundary and j not in kept:
            raise ReadAgain("the sketch's anchors disagree on where a block goes",
                          merger.sk.span(j, j))


def estimate_shift(merger: Reading, pairs: Iterable[tuple[int, int]]) -> int:
    """The sketch's uniform indentation shift: the commonest width difference of the
    matched lines, a block's edge lines next to a marker (context the writer copied)
    counting as much as the ``boundary`` weight (code moved in or out of a block
    changes its own lines' depth, not the context's)."""
    votes: dict[int, float] = {}
    for j, p in pairs:
        d = merger.sk.widths[j] - merger.owidth[p]
        votes[d] = votes.get(d, 0.0) + (merger.wt.boundary if merger.sk.boundary[j] else 1.0)
    return max(votes, key=lambda d: (votes[d], -abs(d))) if votes else 0


def extend(merger: Reading) -> None:
    """Grow every match to equal neighbours up to the next match.

    A run of blank lines is crossed only when the line after it matches too: blank lines
    next to an insertion are as likely new as old, and taking the wrong ones would push
    the block's real blank edge line past code the marker keeps.
    """
    fixed = merger.fixed()
    used = {p for p in merger.sm if p >= 0}
    for idx in range(1, len(fixed) - 1):
        j, p = fixed[idx]
        nj, np_ = fixed[idx + 1]
        _grow(merger, j, p, 1, nj, np_, used)
    fixed = merger.fixed()
    for idx in range(len(fixed) - 2, 0, -1):
        j, p = fixed[idx]
        pj, pp = fixed[idx - 1]
        _grow(merger, j, p, -1, pj, pp, used)


def _grow(merger: Reading, j: int, p: int, step: int, stop_j: int, stop_p: int,
          used: set[int]) -> None:
    ok, sm, m, n = merger.ok, merger.sm, merger.m, merger.n
    kinds, keys = merger.sk.kinds, merger.sk.keys
    new = merger.new_lines
    code = LineKind.CODE
    # (jj, pp) "same": jj != stop_j and pp != stop_p, both in range, sketch line jj unmatched
    # code, original line pp unused, equal keys
    while True:
        run = 0
        while True:
            jj, pp = j + step * (run + 1), p + step * (run + 1)
            if not (jj != stop_j and pp != stop_p and 0 <= jj < m and 0 <= pp < n
                    and sm[jj] < 0 and kinds[jj] == code and pp not in used
                    and keys[jj] == ok[pp] and jj not in new) or ok[pp]:
                break
            run += 1
        nxt = run + 1
        edge = j + step * nxt
        if run and (edge < 0 or edge >= m or kinds[edge] != code):
            nxt = run  # blank lines that end the block: the original's blank lines there
        else:
            jj, pp = j + step * nxt, p + step * nxt
            if not (jj != stop_j and pp != stop_p and 0 <= jj < m and 0 <= pp < n
                    and sm[jj] < 0 and kinds[jj] == code and pp not in used
                    and keys[jj] == ok[pp] and jj not in new):
                return
        for t in range(1, nxt + 1):
            sm[j + step * t] = p + step * t
            used.add(p + step * t)
        j, p = j + step * nxt, p + step * nxt
        if nxt == run:
            return


def faithful_indentation(merger: Reading) -> bool:
    """Whether the sketch copies the file's indentation bytes (most matched indented lines
    agree byte for byte): then its own bytes are trusted, a spaces-to-tabs fix included;
    otherwise the writer converted them, and the file's style is put back."""
    if merger.shift:
        return False
    same = total = 0
    for j, p in enumerate(merger.sm):
        if p >= 0 and merger.ok[p] and merger.owidth[p]:
            total += 1
            raw, oraw = merger.sk.raw[j], merger.o.raw[p]
            same += (raw[: len(raw) - len(raw.lstrip(" \t"))]
                     == oraw[: len(oraw) - len(oraw.lstrip(" \t"))])
    if not total:
        return True  # nothing to judge by: take the sketch's bytes as written
    return 2 * same >= total
