"""The gap search, the piecewise reading's second step: placing the sketch lines between
two anchors.

Between two fixed anchors a small chaining DP runs over the remaining candidate (sketch
line, original line) pairs. A block's first and last non-blank lines next to a marker are
its anchors and weigh most; every original line a block would delete costs a little, so
the placement that explains the sketch with the fewest deletions wins; a line whose
indentation disagrees with the sketch's (after the uniform shift) costs a little.
``Weights`` holds the scores.

Two optimal placements that give different files are a tie: the sketch is ambiguous, and
the applier abstains, unless the sketch itself says which (``break_tie``). In a brace
language it does where only one placement's brackets agree with the sketch's: fewer of its
stretches change the bracket depth otherwise than the original lines they stand for (on by
default; more exact answers on the npm development set, none wrong, no change held out).
Two options decide a tie by the sketch's words first (both off by default: more exact
answers on the development projects, none held out, see BENCHMARKS.md):
* ``ApplyOptions.tie_rewrite``, a rewrite: the sketch's new lines replace the old lines
  they resemble. Where one placement deletes lines like the new ones (line similarity,
  summed) and the other does not, by a clear margin, the sketch rewrites those lines there.
* ``ApplyOptions.tie_file_end``, the end of the file: a sketch whose last block has no
  marker after it ends where the file ends. Where neither placement reads as a rewrite
  and the later one deletes nothing and leaves only blank lines after its last line, the
  block closes the file.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING

import numpy as np

from specialists.apply import chain_kernel
from specialists.apply.expansion import emit_gap
from specialists.apply.languages import (BRACE_LANGUAGES, bracket_net, definition_end,
                                         definition_name)
from specialists.apply.markers import LineKind
from specialists.apply.result import Abstain, ReadAgain
from specialists.apply.similarity import similarities
from specialists.apply.sketch_lines import IMPLICIT
from specialists.apply.weights import DEFAULT_WEIGHTS, Weights, deletion_costs

if TYPE_CHECKING:
    from specialists.apply.reading import Reading

__all__ = ["DEFAULT_WEIGHTS", "Weights", "align_gap", "best_chain", "break_tie", "deletion_costs",
           "new_definitions", "warm"]


_MAX_NODES = 4000
_SMALL_CHAIN = 40  # fewer gap nodes than this: the plain loop (see _best_chain_loop)
_EPS = 1e-9
_SIMILAR = 0.5  # a new line this alike an old line it deletes rewrites it (``break_tie``)
_REWRITE_MARGIN = 0.5  # summed similarity by which one placement must out-rewrite the other


def align_gap(merger: Reading, ja: int, pa: int, jb: int, pb: int) -> None:
    """Place the sketch lines strictly between anchors (ja, pa) and (jb, pb): every
    candidate (sketch line, original line) pair there becomes a weighted node and the best
    chain of them is kept. Abstain when two optimal chains give different text."""
    sk, pos, wt = merger.sk, merger.pos, merger.wt
    nodes: list[tuple[int, int, float]] = []
    for j in range(ja + 1, jb):
        key = sk.keys[j]
        if (sk.kinds[j] != LineKind.CODE or not (key or sk.boundary[j] or sk.edge_blank[j])
                or j in merger.new_lines):
            continue
        found = pos.get(key) if key else merger.blanks
        if not found:
            continue
        lo, hi = bisect_right(found, pa), bisect_left(found, pb)
        if sk.boundary[j]:
            weight = wt.boundary if key else wt.blank_edge
        else:
            weight = wt.middle if key else wt.blank_run
        for p in found[lo:hi]:
            w = weight
            if sk.widths[j] - merger.shift != merger.owidth[p]:
                w -= wt.indent if weight > 1 else wt.middle * 2
            nodes.append((j, p, w))
        if len(nodes) > _MAX_NODES:
            raise Abstain("too many places the sketch's lines could go", sk.span(ja + 1, jb - 1))
    if not nodes:
        return
    merger.searched = True
    fresh = new_definitions(merger, ja + 1, jb)
    if fresh:
        nodes = [node for node in nodes if node[0] not in fresh]
        if not nodes:
            return
    chain, tied = best_chain(merger, nodes, ja, pa, jb, pb, prefer_right=False)
    if tied:  # the other tie-break may give another placement, and another file
        other, _ = best_chain(merger, nodes, ja, pa, jb, pb, prefer_right=True)
        if other != chain and _gap_text(merger, chain, ja, pa, jb, pb) != _gap_text(
            merger, other, ja, pa, jb, pb
        ):
            chosen = break_tie(merger, chain, other, ja, pa, jb, pb)
            if chosen is None:
                code = [j for j in range(ja + 1, jb)
                        if sk.kinds[j] == LineKind.CODE and sk.keys[j]]
                raise ReadAgain(
                    "ambiguous: the block matches in more than one place and structure does "
                    "not decide", sk.span(code[0], code[-1]) if code else sk.span(ja + 1, jb - 1),
                )
            chain = chosen
    for j, p in chain:
        merger.sm[j] = p


def break_tie(merger: Reading, early: list[tuple[int, int]], late: list[tuple[int, int]],
              ja: int, pa: int, jb: int, pb: int) -> list[tuple[int, int]] | None:
    """Of two optimal placements of one gap that give different files (the earliest and the
    latest), the one the sketch says, or ``None``: with the options asked for,
    ``_said_by_words``; else, in a brace language, the one whose brackets agree with the
    sketch's (``_said_by_brackets``)."""
    options = merger.options
    if options.tie_rewrite or options.tie_file_end:
        chosen = _said_by_words(merger, early, late, ja, pa, jb, pb)
        if chosen is not None:
            return chosen
    return _said_by_brackets(merger, early, late, ja, pa, jb, pb)


def _said_by_brackets(merger: Reading, early: list[tuple[int, int]],
                      late: list[tuple[int, int]], ja: int, pa: int, jb: int,
                      pb: int) -> list[tuple[int, int]] | None:
    """In a brace language, the placement under which fewer of the sketch's stretches
    (two consecutive placed lines, no marker between) change the bracket depth otherwise
    than the original lines they stand for, where the two counts differ: a block of the
    sketch that closes one bracket stands for original lines that close one too."""
    if merger.language not in BRACE_LANGUAGES:
        return None
    a = _bracket_mismatches(merger, early, ja, pa, jb, pb)
    b = _bracket_mismatches(merger, late, ja, pa, jb, pb)
    if a == b:
        return None
    return early if a < b else late


def _bracket_mismatches(merger: Reading, chain: list[tuple[int, int]], ja: int, pa: int,
                        jb: int, pb: int) -> int:
    """How many of the placement's stretches inside the sketch change the bracket depth
    by another amount than the original lines from one placed line to the next."""
    count = 0
    for j0, p0, j1, p1 in _segments(merger, chain, ja, pa, jb, pb):
        if j0 < 0 or p0 < 0 or j1 >= merger.m:
            continue
        count += bracket_net(merger.sk.keys, j0, j1) != bracket_net(merger.ok, p0, p1)
    return count


def _said_by_words(merger: Reading, early: list[tuple[int, int]],
                   late: list[tuple[int, int]], ja: int, pa: int, jb: int,
                   pb: int) -> list[tuple[int, int]] | None:
    """The placement whose new lines rewrite lines like them by a clear margin
    (``ApplyOptions.tie_rewrite``); else, with ``tie_file_end``, where the gap closes a
    sketch whose last block has no marker after it, the later one if it deletes nothing and
    is followed only by blank lines (the block ends the file); else ``None``."""
    options = merger.options
    early_rewrite = _rewrite_similarity(merger, early, ja, pa, jb, pb)
    late_rewrite = _rewrite_similarity(merger, late, ja, pa, jb, pb)
    if abs(early_rewrite - late_rewrite) >= _REWRITE_MARGIN:
        if not options.tie_rewrite:
            return None
        return early if early_rewrite > late_rewrite else late
    if max(early_rewrite, late_rewrite) >= _REWRITE_MARGIN:
        return None  # both read as rewrites: of which lines, the sketch does not say
    if (options.tie_file_end and late and jb == merger.m and pb == merger.n
            and merger.sk.kinds[-1] == IMPLICIT
            and not any(merger.ok[p] for p in range(late[-1][1] + 1, pb))
            and not _deletes(merger, late, ja, pa, jb, pb)):
        return late
    return None


def _segments(merger: Reading, chain: list[tuple[int, int]], ja: int, pa: int, jb: int,
              pb: int) -> list[tuple[int, int, int, int]]:
    """(j0, p0, j1, p1) of each two consecutive placed lines of the gap with no separator
    between them: the sketch lines between replace the original lines between."""
    anchors = [(ja, pa)] + chain + [(jb, pb)]
    return [(j0, p0, j1, p1) for (j0, p0), (j1, p1) in zip(anchors, anchors[1:])
            if not merger.sk.sep_between(j0, j1)]


def _deletes(merger: Reading, chain: list[tuple[int, int]], ja: int, pa: int, jb: int,
             pb: int) -> bool:
    """Whether the placement deletes a non-blank original line."""
    return any(merger.ok[p] for _, p0, _, p1 in _segments(merger, chain, ja, pa, jb, pb)
               for p in range(p0 + 1, p1))


def _rewrite_similarity(merger: Reading, chain: list[tuple[int, int]], ja: int, pa: int, jb: int,
                        pb: int) -> float:
    """How much the placement reads as a rewrite: over each new sketch line, its best
    similarity (at least ``_SIMILAR``) to an original line the placement deletes beside it."""
    sk = merger.sk
    total = 0.0
    for j0, p0, j1, p1 in _segments(merger, chain, ja, pa, jb, pb):
        if p1 <= p0 + 1:
            continue
        for j in range(j0 + 1, j1):
            if sk.kinds[j] == LineKind.CODE and sk.keys[j]:
                found = similarities(sk.keys[j], merger.ok, p0 + 1, p1, _SIMILAR)
                total += max((score for score, _ in found), default=0.0)
    return total


def new_definitions(merger: Reading, j0: int, j1: int) -> set[int]:
    """Sketch lines of complete definitions the original does not have (by name): all
    new, so their closing ``}`` must not anchor on some other definition's."""
    sk = merger.sk
    fresh: set[int] = set()
    j = j0
    while j < j1:
        found = (definition_name(sk.keys[j], merger.language)
                 if sk.kinds[j] == LineKind.CODE else None)
        if found is None or merger.sm[j] >= 0 or merger.has_definition(found):
            j += 1
            continue
        end = definition_end(sk.keys, sk.widths, j, j1, merger.language)
        if end > j + 1 and all(sk.kinds[i] == LineKind.CODE for i in range(j, end)):
            fresh.update(range(j, end))
            j = end
        else:
            j += 1
    return fresh


def best_chain(merger: Reading, nodes: list[tuple[int, int, float]], ja: int, pa: int, jb: int,
               pb: int, prefer_right: bool) -> tuple[list[tuple[int, int]], bool]:
    """Best monotone chain of nodes; also whether any tie was met on the way.

    Nodes come sorted by sketch line; the nodes of one sketch line are scored together
    against all nodes of earlier lines (``chain_kernel.best_chain``, compiled: the same
    float operations as the numpy matrices it replaced), since a chain never holds two
    nodes of one line."""
    if len(nodes) < _SMALL_CHAIN:
        return _best_chain_loop(merger, nodes, ja, pa, jb, pb, prefer_right)
    count = len(nodes)
    seps, dc = _arrays(merger)
    back = np.empty(count, dtype=np.int64)
    end, tied = chain_kernel.best_chain(np.array(nodes, dtype=np.float64).reshape(count, 3),
                                        seps, dc, ja, pa, jb, pb, merger.wt.diag, prefer_right,
                                        _EPS, back)
    chain: list[tuple[int, int]] = []
    while end >= 0:
        chain.append((nodes[end][0], nodes[end][1]))
        end = int(back[end])
    chain.reverse()
    return chain, bool(tied)


def _best_chain_loop(merger: Reading, nodes: list[tuple[int, int, float]], ja: int, pa: int, jb: int,
                     pb: int, prefer_right: bool) -> tuple[list[tuple[int, int]], bool]:
    """``best_chain`` for a few nodes: the same recurrence, one pair at a time (numpy's call
    overhead costs more than the loop below about 40 nodes)."""
    sk, dcost = merger.sk, merger.dcost
    count = len(nodes)
    best = [0.0] * count
    back = [-1] * count
    tied = False
    for b in range(count):
        jb_, pb_, wb = nodes[b]
        score = 0.0 if sk.sep_between(ja, jb_) else -(dcost[pb_] - dcost[pa + 1])
        arg = -1
        for a in range(b):
            ja_, pa_, _ = nodes[a]
            if ja_ >= jb_ or pa_ >= pb_:
                continue
            if sk.sep_between(ja_, jb_):
                v = best[a]
            else:
                v = best[a] - (dcost[pb_] - dcost[pa_ + 1])
                if pb_ == pa_ + 1 and jb_ == ja_ + 1:
                    v += merger.wt.diag
            if v > score + _EPS:
                score, arg = v, a
            elif v > score - _EPS:
                tied = True
                if prefer_right:
                    score, arg = v, a
        best[b] = score + wb
        back[b] = arg
    empty = 0.0 if sk.sep_between(ja, jb) else -(dcost[pb] - dcost[pa + 1])
    top, end = empty, -1
    for b in range(count):
        jb_, pb_, _ = nodes[b]
        v = best[b] - (0.0 if sk.sep_between(jb_, jb) else dcost[pb] - dcost[pb_ + 1])
        if v > top + _EPS:
            top, end = v, b
        elif v > top - _EPS:
            tied = True
            if prefer_right:
                top, end = v, b
    chain: list[tuple[int, int]] = []
    while end >= 0:
        chain.append((nodes[end][0], nodes[end][1]))
        end = back[end]
    chain.reverse()
    return chain, tied


def warm() -> None:
    """Load (or, on a cold cache, compile) ``chain_kernel`` now (``applier.warm``)."""
    nodes = np.array([[1, 1, 1.0], [2, 2, 1.0]])
    chain_kernel.best_chain(nodes, np.zeros(4, dtype=np.int64), np.zeros(4), 0, 0, 3, 3, 0.05,
                            False, _EPS, np.empty(2, dtype=np.int64))


def _arrays(merger: Reading) -> tuple[np.ndarray, np.ndarray]:
    """The sketch's separator counts and the deletion costs as numpy arrays (made once)."""
    if merger.np_arrays is None:
        merger.np_arrays = (np.asarray(merger.sk.sep_prefix, dtype=np.int64),
                    np.asarray(merger.dcost, dtype=np.float64))
    return merger.np_arrays


def _gap_text(merger: Reading, chain: list[tuple[int, int]], ja: int, pa: int, jb: int,
              pb: int) -> list[str]:
    """The merged text of one gap under a candidate chain (to compare two placements)."""
    saved = merger.sm[ja + 1:jb]
    for j, p in chain:
        merger.sm[j] = p
    try:
        anchors = [(ja, pa)] + chain + [(jb, pb)]
        out: list[str] = []
        for (j0, p0), (j1, p1) in zip(anchors, anchors[1:]):
            try:
                emit_gap(merger, j0, p0, j1, p1, out, [], dry=True)
            except Abstain:
                out.append("\x00abstain")
            if j1 < jb:
                out.append(merger.ok[p1])
        return out
    finally:
        merger.sm[ja + 1:jb] = saved
