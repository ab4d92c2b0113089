"""Deterministic merge of a lazy sketch into the original file.

The sketch is read as blocks of concrete lines separated by markers (keep the original
lines here) and ``remove`` comments (delete what they name). Each block replaces the
original region it anchors to; lines of that region the block does not repeat are deleted
("deletion by context"), lines it adds are inserted.

Anchoring, cheapest first (pure string and hash-map work; tree-sitter only in ``checks``):

1. *Skeleton*: lines unique in both the original and the sketch, chained by a longest
   increasing subsequence (patience diff), then extended line by line to neighbours.
2. *Gaps*: between two fixed anchors, a small chaining DP over the remaining candidate
   (sketch line, original line) pairs. A block's first and last non-blank lines next to a
   marker are its anchors and weigh most; every original line a block would delete costs a
   little, so the placement that explains the sketch with the fewest deletions wins; a line
   whose indentation disagrees with the sketch's (after the uniform shift) costs a little.
   Two optimal placements that give different files mean the sketch is ambiguous: abstain.
3. *Floating pieces* with no exact anchor between two markers: a ``remove`` comment's
   quoted line or named definition, a new definition replacing the one of the same name,
   or a modified line placed by similarity when exactly one region fits.

Everything that cannot be placed with certainty raises ``Abstain`` with the sketch span.
"""

from __future__ import annotations

import difflib
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Iterable, Iterator

import numpy as np
from rapidfuzz import process as _rf_process
from rapidfuzz.distance import Indel as _rf_indel

from specialists.apply import align as _align
from specialists.apply.languages import definition_end, definition_name, definition_start
from specialists.apply.markers import LineKind, MarkerInfo, classify
from specialists.apply.result import Abstain, ApplyOptions
from specialists.apply.text import Lines, indent_widths, reindent, split_lines

__all__ = ["Merge", "Weights", "merge"]

IMPLICIT = 3  # a marker the sketch left out before its first or after its last block


@dataclass(frozen=True)
class Weights:
    """The gap DP's scores. ``merge`` also runs perturbed copies: a placement that changes
    when a weight moves a little was a near tie, and a near tie is a guess (abstain)."""

    boundary: float = 10.0  # a block's first/last non-blank line next to a marker: its anchor
    blank_edge: float = 3.0  # a blank first/last line of a block: a weak anchor
    blank_run: float = 0.5  # another blank line of that edge run
    middle: float = 0.1  # any other line: matching it must never pay for deleting one
    diag: float = 0.05  # consecutive sketch lines on consecutive original lines
    delete: float = 0.2  # per original non-blank line a block deletes by context
    delete_blank: float = 0.05
    indent: float = 0.3  # the line's indentation disagrees with the sketch's


DEFAULT_WEIGHTS = Weights()
_MAX_NODES = 4000
_SMALL_CHAIN = 40  # fewer gap nodes than this: the plain loop (see _chain_loop)
_DIFFLIB_CHARS = 800  # longer pairs of lines are compared by LCS ratio only
_MAX_HEADER = 6  # lines a definition's signature may take
_BIG_DELETION = 10  # non-blank lines: a deletion this large needs two pinned lines a side
_EPS = 1e-9


@dataclass
class Merge:
    """The merged lines, where each came from, and counts for the result's stats."""

    lines: Lines  # the original, split
    out: list[str]  # merged raw lines
    origin: list[int]  # original index of each merged line, or -1 for a new line
    deleted_by_context: int
    deleted_by_remove: int
    fuzzy: int
    blank_guesses: int  # blank runs kept that the sketch wrote shorter or left out
    final_newline: bool

    def text(self) -> str:
        return self.lines.join(self.out, self.final_newline)


class _Sketch:
    """The sketch's lines with their kinds and what the DP needs to know about them."""

    def __init__(self, lines: Lines, okeys: set[str], language: str | None = None) -> None:
        self.raw = lines.raw
        self.keys = list(lines.keys)
        self.kinds: list[int] = []
        self.infos: list[MarkerInfo | None] = []
        defined: set[str] | None = None
        for key in self.keys:
            kind, info = classify(key)
            if kind != LineKind.CODE and key in okeys:
                kind, info = LineKind.CODE, None  # an existing comment, not a marker
            elif kind == LineKind.REMOVE and info is not None and info.remove_name \
                    and not info.remove_quotes:
                if defined is None:
                    defined = {name for _, name in _definitions_of(okeys, language)}
                if info.remove_name.split(".")[-1].rstrip("()") not in defined:
                    # "Remove all entries in this case": a comment the new code carries,
                    # not an instruction (it names nothing the file defines)
                    kind, info = LineKind.CODE, None
            self.kinds.append(kind)
            self.infos.append(info)
        self.final_newline = lines.final_newline
        self.indent_char = lines.indent_char
        # (sketch line, region, threshold) -> [(similarity, original line)], best first
        self.similar_lines: dict[tuple[int, int, int, float], list[tuple[float, int]]] = {}
        self._add_implicit_markers()
        self.widths = indent_widths(self.raw)
        seps = [0]
        for kind in self.kinds:
            seps.append(seps[-1] + (kind != LineKind.CODE))
        self.sep_prefix = seps
        self.boundary = self._boundaries()
        # Blank lines in a block's edge run (between its edge line and its first non-blank
        # line): weak anchors too, so a run of blank lines lands on the same run.
        self.edge_blank = [False] * len(self.keys)
        for order in (range(len(self.keys)), range(len(self.keys) - 1, -1, -1)):
            after_sep = True
            for j in order:
                if self.kinds[j] != LineKind.CODE:
                    after_sep = True
                elif self.keys[j]:
                    after_sep = False
                elif after_sep:
                    self.edge_blank[j] = True

    def _add_implicit_markers(self) -> None:
        """A sketch that starts (ends) with code may have dropped its first (last) marker, or
        be a whole file: either way an implicit marker there lets the lines before its first
        anchor be kept, or replaced when its first lines are new (see ``_emit_single_sep``)."""
        code = [j for j, k in enumerate(self.kinds) if k == LineKind.CODE and self.keys[j]]
        seps = [j for j, k in enumerate(self.kinds) if k != LineKind.CODE]
        first_sep = seps[0] if seps else len(self.kinds)
        last_sep = seps[-1] if seps else -1
        if code and code[-1] > last_sep:
            self._insert(len(self.keys))
        if code and code[0] < first_sep:
            self._insert(0)

    def _insert(self, at: int) -> None:
        self.raw.insert(at, "")
        self.keys.insert(at, "")
        self.kinds.insert(at, IMPLICIT)
        self.infos.insert(at, None)

    def _boundaries(self) -> list[bool]:
        """Lines that anchor a block next to a separator: its first and last line, and its
        first and last non-blank line (a blank edge line alone anchors weakly)."""
        n = len(self.keys)
        flags = [False] * n
        for order in (range(n), range(n - 1, -1, -1)):
            state = 2  # 2: right after a separator; 1: saw the blank edge line; 0: done
            for j in order:
                if self.kinds[j] != LineKind.CODE:
                    state = 2
                elif state:
                    if state == 2 or self.keys[j]:
                        flags[j] = True
                    state = 1 if (state == 2 and not self.keys[j]) else 0
        return flags

    def sep_between(self, ja: int, jb: int) -> bool:
        """Whether a marker or remove comment lies strictly between sketch lines ja and jb."""
        return self.sep_prefix[jb] - self.sep_prefix[ja + 1] > 0

    def span(self, j0: int, j1: int) -> tuple[int, int]:
        """1-based inclusive span in the caller's sketch (implicit markers removed)."""
        j0 = max(j0, 0)
        j1 = min(max(j1, j0), len(self.keys) - 1)
        implicit_before = 1 if self.kinds and self.kinds[0] == IMPLICIT else 0
        last = len(self.keys) - implicit_before - (1 if self.kinds[-1] == IMPLICIT else 0)
        a = min(max(j0 - implicit_before, 0) + 1, max(last, 1))
        b = min(max(j1 - implicit_before, 0) + 1, max(last, 1))
        return (a, max(a, b))


def _definitions_of(keys: Iterable[str], language: str | None) -> set[tuple[str, str]]:
    """``(kind, name)`` of every definition these (stripped) lines open."""
    found = (definition_name(key, language) for key in keys if key)
    return {d for d in found if d is not None}


def _strip_fences(text: str) -> str:
    stripped = text.strip("\n")
    if stripped.startswith("```") and stripped.rstrip().endswith("```"):
        body = stripped.split("\n")
        if len(body) >= 2:
            return "\n".join(body[1:-1]) + "\n"
    return text


def _heaviest_chain(pairs: list[tuple[int, int, float]], n: int) -> list[tuple[int, int]]:
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


def _weak(key: str) -> bool:
    """Lines too common to anchor on alone: braces, ``else:``, ``return``..."""
    return len(key) <= 4 or not any(ch.isalnum() for ch in key)


def _deletion_costs(okeys: list[str], wt: Weights) -> list[float]:
    """Prefix sums of what deleting each original line costs (a blank line costs less)."""
    delete, blank = wt.delete, wt.delete_blank
    return list(accumulate([delete if key else blank for key in okeys], initial=0.0))

class _Merger:
    def __init__(self, olines: Lines, sk: _Sketch, language: str | None, options: ApplyOptions,
                 weights: Weights = DEFAULT_WEIGHTS):
        self.wt = wt = weights
        self.searched = False  # whether a gap DP chose between placements
        self.o = olines
        self.ok = olines.keys
        self.sk = sk
        self.language = language
        self.options = options
        self.n = len(olines.keys)
        self.m = len(sk.keys)
        pos: dict[str, list[int]] = {}
        for i, key in enumerate(self.ok):
            if key:
                bucket = pos.get(key)
                if bucket is None:
                    pos[key] = [i]
                else:
                    bucket.append(i)
        self.pos = pos
        self.blanks = [i for i, key in enumerate(self.ok) if not key]
        self.owidth = indent_widths(olines.raw)
        self.dcost = _deletion_costs(self.ok, wt)
        self._np: tuple[np.ndarray, np.ndarray] | None = None
        self.sm = [-1] * self.m
        self._defs: set[tuple[str, str]] | None = None
        self.shift = 0
        self.fuzzy = 0
        self.faithful = True
        # The near-tie runs only compare their output with this one's, which was checked.
        self.check_deletions = weights is DEFAULT_WEIGHTS
        self.dp_spans: dict[int, tuple[int, int]] = {}
        self.blank_guesses = 0
        # Keep a blank run the sketch wrote shorter (writers drop blank lines); off when
        # keeping them would leave the sketch changing nothing.
        self.keep_short_blanks = True
        self.deleted_by_context = self.deleted_by_remove = 0

    def fork(self, weights: Weights | None = None) -> _Merger:
        """A fresh merger over the same original and sketch, sharing what only depends on
        them (line positions, widths), for a second reading or other ``weights``."""
        other = _Merger.__new__(_Merger)
        other.__dict__.update(self.__dict__)
        if weights is not None and weights != self.wt:
            other.wt = weights
            other.dcost = _deletion_costs(self.ok, weights)
            other._np = None
        other.searched = False
        other.sm = [-1] * self.m
        other._defs = self._defs
        other.shift = 0
        other.fuzzy = 0
        other.faithful = True
        other.check_deletions = other.wt is DEFAULT_WEIGHTS
        other.dp_spans = {}
        other.blank_guesses = 0
        other.deleted_by_context = other.deleted_by_remove = 0
        return other

    # ---- anchoring -------------------------------------------------------------------

    def _unique_pairs(self) -> list[tuple[int, int]]:
        """(sketch line, original line) for every line found once in each and not trivial;
        also counts the sketch's code lines (``scount``)."""
        sk, pos = self.sk, self.pos
        counts: dict[str, int] = {}
        for j, key in enumerate(sk.keys):
            if sk.kinds[j] == LineKind.CODE and key:
                counts[key] = counts.get(key, 0) + 1
        self.scount = counts
        return [(j, pos[key][0]) for j, key in enumerate(sk.keys)
                if key and counts.get(key) == 1 and sk.kinds[j] == LineKind.CODE
                and not _weak(key) and len(pos.get(key, ())) == 1]

    def anchor(self) -> list[tuple[int, int]]:
        sk = self.sk
        pairs = [(j, p, self.wt.boundary if sk.boundary[j] else 1.0)
                 for j, p in self._unique_pairs()]
        skeleton = _heaviest_chain(pairs, self.n)
        self._check_dropped_anchors(pairs, skeleton)
        for j, p in skeleton:
            self.sm[j] = p
        self.shift = self._estimate_shift(skeleton)
        self._extend()
        fixed = self._fixed()
        for (ja, pa), (jb, pb) in zip(fixed, fixed[1:]):
            if jb - ja > 1:
                self._align_gap(ja, pa, jb, pb)
        self._extend()
        self.faithful = self._faithful_indentation()
        return self._fixed()

    def merge_dp(self, costs: _align.Costs | None = None) -> tuple[list[str], list[int]]:
        """Anchor by the global alignment (``align``) and assemble; abstain when the earliest
        and the latest optimal alignments give different files."""
        sk = self.sk
        self.shift = self._estimate_shift(self._unique_pairs())
        removes: dict[int, list[tuple[int, int]]] = {}
        for j, kind in enumerate(sk.kinds):
            if kind == LineKind.REMOVE:
                found = self._remove_candidates(sk.infos[j] or MarkerInfo())
                if not found:
                    raise Abstain("the remove comment names code that is not in the original",
                                  sk.span(j, j))
                removes[j] = found
        try:
            early, late = _align.align(self.ok, self.owidth, sk.keys, sk.kinds, sk.widths,
                                       self.shift, removes, _weak, costs)
        except ValueError:
            raise Abstain("the sketch cannot be read against the original") from None
        self.check_deletions = False
        results = []
        for al in (early, late):
            self.sm = list(al.sm)
            self.dp_spans = al.spans
            self.faithful = self._faithful_indentation()
            results.append(self.assemble(self._fixed()))
            if al.sm == late.sm and al.spans == late.spans:
                break
        if len(results) == 2 and results[0][0] != results[1][0]:
            diff = [j for j in range(self.m) if early.sm[j] != late.sm[j]]
            span = sk.span(diff[0], diff[-1]) if diff else None
            raise Abstain("ambiguous: the sketch reads as well in more than one place", span)
        return results[-1]

    def _remove_candidates(self, info: MarkerInfo) -> list[tuple[int, int]]:
        """Every original run a remove comment may delete: its quoted first..last lines or
        the definition it names, with ``_separating_blanks``."""
        ok, n = self.ok, self.n
        runs: list[tuple[int, int]] = []
        if info.remove_quotes:
            first = info.remove_quotes[0].strip()
            last = info.remove_quotes[-1].strip()
            starts = self._quoted(first, 0, n)
            for p in starts:
                if len(info.remove_quotes) == 1:
                    runs.append((p, p + 1))
                    continue
                runs += [(p, q + 1) for q in range(p, n) if ok[q] == last]
        elif info.remove_name:
            runs = self._definitions_named(info.remove_name.split(".")[-1].rstrip("()"), 0, n)
        return sorted({self._separating_blanks(t0, t1) for t0, t1 in runs})

    def _separating_blanks(self, t0: int, t1: int) -> tuple[int, int]:
        """A removed run takes the blank lines after it when a blank line (or the file's
        start) precedes it, and the blank lines before it at the end of the file, so the
        blank separation around it stays as it was. The piecewise reading's rule
        (``_with_separating_blanks``) differs on purpose: where the two disagree the
        cross-check abstains, and sharing one rule made both wrong together at k = 0
        (BENCHMARKS.md, applier round 3)."""
        ok, n = self.ok, self.n
        if t1 >= n:
            while t0 > 0 and not ok[t0 - 1]:
                t0 -= 1
        elif t0 == 0 or not ok[t0 - 1]:
            while t1 < n and not ok[t1]:
                t1 += 1
        return t0, t1

    def _faithful_indentation(self) -> bool:
        """Whether the sketch copies the file's indentation bytes (most matched indented lines
        agree byte for byte): then its own bytes are trusted, a spaces-to-tabs fix included;
        otherwise the writer converted them, and the file's style is put back."""
        if self.shift:
            return False
        same = total = 0
        for j, p in enumerate(self.sm):
            if p >= 0 and self.ok[p] and self.owidth[p]:
                total += 1
                raw, oraw = self.sk.raw[j], self.o.raw[p]
                same += raw[: len(raw) - len(raw.lstrip(" \t"))] == oraw[: len(oraw) - len(oraw.lstrip(" \t"))]
        if not total:
            return True  # nothing to judge by: take the sketch's bytes as written
        return 2 * same >= total

    def _check_dropped_anchors(self, pairs: list[tuple[int, int, float]],
                               skeleton: list[tuple[int, int]]) -> None:
        """A block's edge line next to a marker, found once in the original and once in the
        sketch, left out of the chain: the other anchors put the block somewhere this line
        says it is not (new code copying old lines, usually). The sketch contradicts itself."""
        kept = {j for j, _ in skeleton}
        for j, _, weight in pairs:
            if weight >= self.wt.boundary and j not in kept:
                raise Abstain("the sketch's anchors disagree on where a block goes",
                              self.sk.span(j, j))

    def _fixed(self) -> list[tuple[int, int]]:
        out = [(-1, -1)]
        out.extend((j, p) for j, p in enumerate(self.sm) if p >= 0)
        out.append((self.m, self.n))
        return out

    def _estimate_shift(self, pairs: Iterable[tuple[int, int]]) -> int:
        """The sketch's uniform indentation shift: the commonest width difference of the
        matched lines, a block's edge lines next to a marker (context the writer copied)
        counting as much as the ``boundary`` weight (code moved in or out of a block
        changes its own lines' depth, not the context's)."""
        votes: dict[int, float] = {}
        for j, p in pairs:
            d = self.sk.widths[j] - self.owidth[p]
            votes[d] = votes.get(d, 0.0) + (self.wt.boundary if self.sk.boundary[j] else 1.0)
        return max(votes, key=lambda d: (votes[d], -abs(d))) if votes else 0

    def _extend(self) -> None:
        """Grow every match to equal neighbours up to the next match.

        A run of blank lines is crossed only when the line after it matches too: blank lines
        next to an insertion are as likely new as old, and taking the wrong ones would push
        the block's real blank edge line past code the marker keeps.
        """
        fixed = self._fixed()
        used = {p for p in self.sm if p >= 0}
        for idx in range(1, len(fixed) - 1):
            j, p = fixed[idx]
            nj, np_ = fixed[idx + 1]
            self._grow(j, p, 1, nj, np_, used)
        fixed = self._fixed()
        for idx in range(len(fixed) - 2, 0, -1):
            j, p = fixed[idx]
            pj, pp = fixed[idx - 1]
            self._grow(j, p, -1, pj, pp, used)

    def _grow(self, j: int, p: int, step: int, stop_j: int, stop_p: int, used: set[int]) -> None:
        sk, ok, sm = self.sk, self.ok, self.sm

        def same(jj: int, pp: int) -> bool:
            return (jj != stop_j and pp != stop_p and 0 <= jj < self.m and 0 <= pp < self.n
                    and sm[jj] < 0 and sk.kinds[jj] == LineKind.CODE and pp not in used
                    and sk.keys[jj] == ok[pp])

        while True:
            run = 0
            while same(j + step * (run + 1), p + step * (run + 1)) and not ok[p + step * (run + 1)]:
                run += 1
            nxt = run + 1
            edge = j + step * nxt
            if run and (edge < 0 or edge >= self.m or sk.kinds[edge] != LineKind.CODE):
                nxt = run  # blank lines that end the block: the original's blank lines there
            elif not same(j + step * nxt, p + step * nxt):
                return
            for t in range(1, nxt + 1):
                sm[j + step * t] = p + step * t
                used.add(p + step * t)
            j, p = j + step * nxt, p + step * nxt
            if nxt == run:
                return

    def _align_gap(self, ja: int, pa: int, jb: int, pb: int) -> None:
        sk, pos, wt = self.sk, self.pos, self.wt
        nodes: list[tuple[int, int, float]] = []
        for j in range(ja + 1, jb):
            key = sk.keys[j]
            if sk.kinds[j] != LineKind.CODE or not (key or sk.boundary[j] or sk.edge_blank[j]):
                continue
            found = pos.get(key) if key else self.blanks
            if not found:
                continue
            lo, hi = bisect_right(found, pa), bisect_left(found, pb)
            if sk.boundary[j]:
                weight = wt.boundary if key else wt.blank_edge
            else:
                weight = wt.middle if key else wt.blank_run
            for p in found[lo:hi]:
                w = weight
                if sk.widths[j] - self.shift != self.owidth[p]:
                    w -= wt.indent if weight > 1 else wt.middle * 2
                nodes.append((j, p, w))
            if len(nodes) > _MAX_NODES:
                raise Abstain("too many places the sketch's lines could go", sk.span(ja + 1, jb - 1))
        if not nodes:
            return
        self.searched = True
        fresh = self._new_definitions(ja + 1, jb)
        if fresh:
            nodes = [node for node in nodes if node[0] not in fresh]
            if not nodes:
                return
        chain, tied = self._chain(nodes, ja, pa, jb, pb, prefer_right=False)
        if tied:  # the other tie-break may give another placement, and another file
            other, _ = self._chain(nodes, ja, pa, jb, pb, prefer_right=True)
            if other != chain and self._gap_text(chain, ja, pa, jb, pb) != self._gap_text(
                other, ja, pa, jb, pb
            ):
                code = [j for j in range(ja + 1, jb) if sk.kinds[j] == LineKind.CODE and sk.keys[j]]
                raise Abstain(
                    "ambiguous: the block matches in more than one place and structure does not decide",
                    sk.span(code[0], code[-1]) if code else sk.span(ja + 1, jb - 1),
                )
        for j, p in chain:
            self.sm[j] = p

    def _new_definitions(self, j0: int, j1: int) -> set[int]:
        """Sketch lines of complete definitions the original does not have (by name): all
        new, so their closing ``}`` must not anchor on some other definition's."""
        sk = self.sk
        fresh: set[int] = set()
        j = j0
        while j < j1:
            found = definition_name(sk.keys[j], self.language) if sk.kinds[j] == LineKind.CODE else None
            if found is None or self.sm[j] >= 0 or self._has_definition(found):
                j += 1
                continue
            end = definition_end(sk.keys, sk.widths, j, j1, self.language)
            if end > j + 1 and all(sk.kinds[i] == LineKind.CODE for i in range(j, end)):
                fresh.update(range(j, end))
                j = end
            else:
                j += 1
        return fresh

    def _definitions(self) -> set[tuple[str, str]]:
        """``(kind, name)`` of the original's definitions (made once, shared by forks)."""
        if self._defs is None:
            self._defs = _definitions_of(self.ok, self.language)
        return self._defs

    def _has_definition(self, found: tuple[str, str]) -> bool:
        return found in self._definitions()

    def _chain(self, nodes: list[tuple[int, int, float]], ja: int, pa: int, jb: int, pb: int,
               prefer_right: bool) -> tuple[list[tuple[int, int]], bool]:
        """Best monotone chain of nodes; also whether any tie was met on the way.

        Nodes come sorted by sketch line; the nodes of one sketch line are scored together
        against all nodes of earlier lines (one matrix per line, numpy), since a chain never
        holds two nodes of one line."""
        if len(nodes) < _SMALL_CHAIN:
            return self._chain_loop(nodes, ja, pa, jb, pb, prefer_right)
        sep_prefix = self.sk.sep_prefix
        dcost = self.dcost
        count = len(nodes)
        table = np.array(nodes, dtype=np.float64).reshape(count, 3)
        js = table[:, 0].astype(np.int64)
        ps = table[:, 1].astype(np.int64)
        seps, dc = self._arrays()
        a_sep = seps[js + 1]  # as a predecessor: separators counted after its line
        a_cost = dc[ps + 1]
        best = np.empty(count)
        back = np.full(count, -1, dtype=np.int64)
        tied = False
        starts = np.flatnonzero(np.diff(js, prepend=-1))
        ends = np.append(starts[1:], count)
        for s, e in zip(starts.tolist(), ends.tolist()):
            jb_ = int(js[s])
            pbs = ps[s:e]
            if sep_prefix[jb_] - sep_prefix[ja + 1] > 0:
                start = np.zeros(e - s)
            else:
                start = -(dc[pbs] - dc[pa + 1])
            if s == 0:
                best[s:e] = start + table[s:e, 2]
                continue
            sep = seps[jb_] - a_sep[:s] > 0
            v = best[None, :s] - np.where(sep[None, :], 0.0, dc[pbs][:, None] - a_cost[None, :s])
            pa_ = ps[None, :s]
            near = (~sep & (js[:s] == jb_ - 1))[None, :] & (pa_ == pbs[:, None] - 1)
            v = np.where(near, v + self.wt.diag, v)
            v[pa_ >= pbs[:, None]] = -np.inf
            score, arg, row_tied = _pick(v, start, prefer_right)
            tied = tied or row_tied
            best[s:e] = score + table[s:e, 2]
            back[s:e] = arg
        empty = 0.0 if sep_prefix[jb] - sep_prefix[ja + 1] > 0 else -(dcost[pb] - dcost[pa + 1])
        tail = np.where(seps[jb] - a_sep > 0, 0.0, dc[pb] - a_cost)
        _, end_arg, end_tied = _pick((best - tail)[None, :], np.array([empty]), prefer_right)
        tied = tied or end_tied
        end = int(end_arg[0])
        chain: list[tuple[int, int]] = []
        while end >= 0:
            chain.append((int(js[end]), int(ps[end])))
            end = int(back[end])
        chain.reverse()
        return chain, tied

    def _chain_loop(self, nodes: list[tuple[int, int, float]], ja: int, pa: int, jb: int, pb: int,
                    prefer_right: bool) -> tuple[list[tuple[int, int]], bool]:
        """``_chain`` for a few nodes: the same recurrence, one pair at a time (numpy's call
        overhead costs more than the loop below about 40 nodes)."""
        sk, dcost = self.sk, self.dcost
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
                        v += self.wt.diag
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

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The sketch's separator counts and the deletion costs as numpy arrays (made once)."""
        if self._np is None:
            self._np = (np.asarray(self.sk.sep_prefix, dtype=np.int64),
                        np.asarray(self.dcost, dtype=np.float64))
        return self._np

    def _gap_text(self, chain: list[tuple[int, int]], ja: int, pa: int, jb: int, pb: int) -> list[str]:
        """The merged text of one gap under a candidate chain (to compare two placements)."""
        saved = self.sm[ja + 1:jb]
        for j, p in chain:
            self.sm[j] = p
        try:
            anchors = [(ja, pa)] + chain + [(jb, pb)]
            out: list[str] = []
            for (j0, p0), (j1, p1) in zip(anchors, anchors[1:]):
                try:
                    self._emit_gap(j0, p0, j1, p1, out, [], dry=True)
                except Abstain:
                    out.append("\x00abstain")
                if j1 < jb:
                    out.append(self.ok[p1])
            return out
        finally:
            self.sm[ja + 1:jb] = saved

    def _check_implicit_deletion(self, ja: int, pa: int, jb: int, pb: int) -> None:
        """Original lines deleted between two consecutive sketch lines (no marker between):
        certain only when both lines are pinned by a run holding a line found once in the
        original and once in the sketch, or when the sketch's new lines there rewrite them.
        Otherwise the two lines may be a copy placed on the wrong lines, and the deletion is
        the silent loss of code the issue warns about (issue 4)."""
        if (not self.check_deletions or ja < 0 or jb >= self.m or pb <= pa + 1
                or self.sk.sep_between(ja, jb)):
            return
        gone = [p for p in range(pa + 1, pb) if self.ok[p]]
        if not gone:
            return
        need = 1 if len(gone) <= _BIG_DELETION else 2
        if self._anchored_run(ja, pa, -1, need) and self._anchored_run(jb, pb, 1, need):
            return
        new = [self.sk.keys[j] for j in range(ja + 1, jb) if self.sk.keys[j]]
        # The lower line also fits at or before the upper one's place (or the reverse): the
        # sketch reads as well as a pure insertion there, with nothing deleted.
        avoidable = self.sk.keys[jb] in self.ok[pa:pb] or self.sk.keys[ja] in self.ok[pa + 1:pb + 1]
        if not avoidable and (self._rewrites_body(ja, pa, pb)
                              or _rewrites(new, [self.ok[p] for p in gone])):
            return
        raise Abstain("the sketch deletes original lines between two lines that are not "
                      "certainly placed", self.sk.span(ja, jb))

    def _rewrites_body(self, ja: int, pa: int, pb: int) -> bool:
        """The deletion runs from inside a pinned definition to its end: the sketch wrote
        that definition's new body in full (a full definition replaces the old one)."""
        sk = self.sk
        j, p = ja, pa
        while j >= 0 and sk.kinds[j] == LineKind.CODE and self.sm[j] == p:
            key = sk.keys[j]
            if key and definition_name(key, self.language) is not None:
                if not self._unique(key):
                    return False
                end = self._definition_end(p, self.n)
                return end - 1 <= pb <= end + 1
            j -= 1
            p -= 1
        return False

    def _unique(self, key: str) -> bool:
        """A line found once in the original and once in the sketch: it pins its match."""
        return len(self.pos.get(key, ())) == 1 and self.scount.get(key) == 1

    def _anchored_run(self, j: int, p: int, step: int, need: int = 1) -> bool:
        """Whether the diagonal run of matches through (j, p), walking by ``step``, holds a line
        that occurs once in the original and once in the sketch."""
        sk = self.sk
        while 0 <= j < self.m and sk.kinds[j] == LineKind.CODE and self.sm[j] == p:
            if sk.keys[j] and self._unique(sk.keys[j]):
                need -= 1
                if need <= 0:
                    return True
            j += step
            p += step
        return False

    # ---- assembly --------------------------------------------------------------------

    def assemble(self, fixed: list[tuple[int, int]]) -> tuple[list[str], list[int]]:
        out: list[str] = []
        origin: list[int] = []
        self.deleted_by_context = 0
        self.deleted_by_remove = 0
        self.blank_guesses = 0
        for (ja, pa), (jb, pb) in zip(fixed, fixed[1:]):
            self._check_implicit_deletion(ja, pa, jb, pb)
            self._emit_gap(ja, pa, jb, pb, out, origin)
            if jb < self.m:
                self._emit_matched(jb, pb, out, origin)
        return out, origin

    def _emit_matched(self, j: int, p: int, out: list[str], origin: list[int]) -> None:
        """A sketch line matched to original line p: the original's bytes where they agree.

        The original keeps its indentation characters and line ending; the sketch decides the
        rest (its trailing whitespace too), and a deliberate re-indent (code moved into a
        block) takes the sketch's indentation, converted to the original's style.
        """
        sraw, oraw = self.sk.raw[j].rstrip("\r"), self.o.raw[p]
        cr = "\r" if oraw.endswith("\r") else ""
        obody = oraw[: len(oraw) - len(cr)]
        if not self.ok[p]:  # blank on both sides: the sketch's whitespace, unless shifted
            line = "" if self.shift else sraw
        elif self.sk.widths[j] - self.shift == self.owidth[p]:
            # Same width: the original's indentation characters, unless the sketch writes
            # this line in the file's own style and the original line did not (a fix).
            s_indent = sraw[: len(sraw) - len(sraw.lstrip(" \t"))]
            o_indent = obody[: len(obody) - len(obody.lstrip(" \t"))]
            # The sketch's own bytes when it writes in the file's style and unshifted: a
            # spaces-to-tabs fix is an edit; a sketch in another style mangled them.
            indent = o_indent
            if self.faithful:
                indent = s_indent
            line = indent + sraw.lstrip(" \t")
        else:
            out.append(self._new_line(j))
            origin.append(-1)
            return
        if line == obody:
            out.append(oraw)
            origin.append(p)
        else:
            out.append(line + cr)
            origin.append(-1)

    def _new_line(self, j: int) -> str:
        line = self.sk.raw[j]
        if not self.faithful:
            line = reindent(line, self.sk.widths[j] - self.shift, self._indent_char_near(j))
        return line + "\r" if self.o.crlf else line

    def _indent_char_near(self, j: int) -> str:
        """The indentation character of the nearest indented original line the sketch's
        block matched around line j (a Go file's template strings may be indented with
        spaces while its code uses tabs); the file's commonest otherwise."""
        for step in (-1, 1):
            i = j + step
            while 0 <= i < self.m and self.sk.kinds[i] == LineKind.CODE:
                p = self.sm[i]
                if p >= 0 and self.owidth[p] > 0:
                    return self.o.raw[p][0]
                i += step
        return self.o.indent_char

    def _emit_gap(self, ja: int, pa: int, jb: int, pb: int, out: list[str], origin: list[int],
                  dry: bool = False) -> None:
        sk = self.sk
        items = range(ja + 1, jb)
        seps = [j for j in items if sk.kinds[j] != LineKind.CODE]
        if not seps:
            new = list(items)
            if (self.keep_short_blanks and all(not sk.keys[j] for j in new) and pb > pa + 1
                    and all(not self.ok[p] for p in range(pa + 1, pb))):
                self._keep(pa + 1, pb, out, origin)  # blank lines the sketch dropped or merged
                self.blank_guesses += not dry
                return
            self._replace_run(pa + 1, pb, new, out, origin, dry)
            return
        first, last = seps[0], seps[-1]
        lo, hi = pa + 1, pb
        pre = self._trim_blanks(list(range(ja + 1, first)), True, lo, hi)
        post = self._trim_blanks(list(range(last + 1, jb)), False, lo, hi)
        # A changed definition header next to a marker replaces the header of the same name.
        old_header = self._replaced_header(post, lo, hi)
        if old_header is not None:
            self._delete(old_header, hi, by_remove=False, dry=dry)
            hi = old_header
        head: list[int] = []
        if pre and lo < hi and self._same_definition(pre[0], lo):
            head = [lo]
            lo += 1
        self._emit_new(pre, out, origin)
        if head:
            self._delete(head[0], head[0] + 1, by_remove=False, dry=dry)
        if len(seps) == 1:
            if sk.kinds[seps[0]] == LineKind.MARKER:
                cut = self._unfinished_definition(seps[0], lo, hi)
                if cut > lo:
                    self._delete(lo, cut, by_remove=False, dry=dry)
                    lo = cut
            self._emit_single_sep(seps[0], pre, post, lo, hi, out, origin, dry)
        else:
            self._emit_floating(seps, lo, hi, out, origin, dry)
        self._emit_new(post, out, origin)

    def _replace_run(self, lo: int, hi: int, new: list[int], out: list[str], origin: list[int],
                     dry: bool) -> None:
        """Original lines lo..hi give way to the sketch lines ``new``. A blank run at either
        end that the sketch wrote shorter keeps its original length: sketch writers drop a
        blank line (aider sees the same), they do not mean to delete it."""
        ok, keys = self.ok, self.sk.keys
        lead_o = 0
        while lo + lead_o < hi and not ok[lo + lead_o]:
            lead_o += 1
        lead_s = 0
        while lead_s < len(new) and not keys[new[lead_s]]:
            lead_s += 1
        if self.keep_short_blanks and lead_o > lead_s and lo + lead_o < hi and lead_s < len(new):
            self._keep(lo, lo + lead_o, out, origin)
            self.blank_guesses += not dry
            lo, new = lo + lead_o, new[lead_s:]
        tail_o = 0
        while hi - tail_o - 1 >= lo and not ok[hi - tail_o - 1]:
            tail_o += 1
        tail_s = 0
        while tail_s < len(new) and not keys[new[len(new) - 1 - tail_s]]:
            tail_s += 1
        keep_tail = self.keep_short_blanks and tail_o > tail_s and hi - tail_o > lo and tail_s < len(new)
        if keep_tail:
            new = new[:len(new) - tail_s]
            hi -= tail_o
            self.blank_guesses += not dry
        self._delete(lo, hi, by_remove=False, dry=dry)
        self._emit_new(new, out, origin)
        if keep_tail:
            self._keep(hi, hi + tail_o, out, origin)

    def _trim_blanks(self, js: list[int], before_sep: bool, lo: int, hi: int) -> list[int]:
        """Unmatched blank lines next to a marker that the kept span starts (ends) with too:
        they stand for the same blank lines, which the span keeps."""
        ok = self.ok
        if before_sep:
            p = lo
            while js and not self.sk.keys[js[-1]] and p < hi and not ok[p]:
                js.pop()
                p += 1
        else:
            p = hi - 1
            while js and not self.sk.keys[js[0]] and p >= lo and not ok[p]:
                js.pop(0)
                p -= 1
        return js

    def _emit_single_sep(self, sep: int, pre: list[int], post: list[int], lo: int, hi: int,
                         out: list[str], origin: list[int], dry: bool) -> None:
        sk = self.sk
        kind = sk.kinds[sep]
        if kind == LineKind.REMOVE:
            info = sk.infos[sep]
            if (info is not None and (info.remove_quotes or info.remove_name) and lo < hi
                    and sep not in self.dp_spans):
                target = self._locate_remove(info, lo, hi, sep, required=False)
                if target is None:
                    raise Abstain("the remove comment names code that is not where it stands",
                                  sk.span(sep, sep))
                beside = sum(1 for p in range(lo, hi) if self.ok[p] and not target[0] <= p < target[1])
                if beside:  # e.g. a sketch that ends with a remove comment, its last marker lost
                    raise Abstain(f"the sketch would delete {beside} lines beside what its remove "
                                  f"comment names", sk.span(sep, sep))
            self._delete(lo, hi, by_remove=True, dry=dry)
            return
        if kind == IMPLICIT:
            # No marker before the first (after the last) block: either the sketch forgot it
            # (keep the lines), or its first new lines replace the file's first lines.
            new = [sk.keys[j] for j in (post if sep == 0 else pre) if sk.keys[j]]
            rest = [self.ok[p] for p in range(lo, hi) if self.ok[p]]
            other_defs = [key for key in rest if definition_name(key, self.language) is not None
                          and key not in new]
            if lo < hi and (not rest or (new and not other_defs and hi - lo <= 2 * len(new) + 2)):
                # Only blank lines beyond the sketch's first (last) line, or a few lines its
                # new lines replace: it writes the file's start (end). Nobody leaves out a
                # marker that stands for blank lines only. A definition there that the sketch
                # does not repeat may be what a left-out marker stood for: abstain.
                self._delete(lo, hi, by_remove=False, dry=dry)
                return
            if new and other_defs and hi - lo <= 2 * len(new) + 2:
                raise Abstain(f"the sketch {'starts' if sep == 0 else 'ends'} with new code and "
                              f"no marker: it does not say whether the {len(rest)} lines "
                              f"{'before' if sep == 0 else 'after'} it stay",
                              sk.span(sep, sep))
        self._check_keep(sep, lo, hi)
        if kind == LineKind.MARKER:
            self._check_marker_indent(sep, lo, hi)
        self._keep(lo, hi, out, origin)

    def _check_marker_indent(self, sep: int, lo: int, hi: int) -> None:
        """A marker stands for lines that start at its own indentation (that is where a
        sketch writer puts it). Kept lines that open deeper than the marker are the rest of
        the statement before it, which the sketch may have rewritten: abstain."""
        width = self.sk.widths[sep] - self.shift
        p = lo
        while p < hi and not self.ok[p]:
            p += 1
        if p < hi and self.owidth[p] > width:
            raise Abstain("the marker's indentation does not match the code it would keep",
                          self.sk.span(sep, sep))

    def _emit_floating(self, seps: list[int], lo: int, hi: int, out: list[str], origin: list[int],
                       dry: bool) -> None:
        """Several separators between two anchors: place each group between the markers.

        A group is a run of remove comments and code lines with no marker inside. One right
        after the left anchor (or right before the right one) is attached to it; one between
        two markers floats and is placed by what it names or by similarity.
        """
        sk = self.sk
        groups: list[tuple[int, int]] = []  # inclusive sketch ranges
        j = seps[0]
        while j <= seps[-1]:
            if sk.kinds[j] in (LineKind.MARKER, IMPLICIT):
                j += 1
                continue
            start = j
            while j <= seps[-1] and sk.kinds[j] not in (LineKind.MARKER, IMPLICIT):
                j += 1
            if any(sk.kinds[i] == LineKind.REMOVE or sk.keys[i] for i in range(start, j)):
                groups.append((start, j - 1))
        cursor = lo
        marker_before = False
        for g0, g1 in groups:
            attached_left = g0 == seps[0]
            attached_right = g1 == seps[-1]
            marker_before = any(sk.kinds[i] in (LineKind.MARKER, IMPLICIT) for i in range(seps[0], g0))
            t0, t1 = self._locate_group(g0, g1, cursor, hi)
            if attached_right:
                t1 = hi
            if cursor < t0:
                if attached_left or not marker_before:
                    self._delete(cursor, t0, by_remove=False, dry=dry)
                else:
                    self._check_keep_range(seps[0], g0, cursor, t0)
                    self._keep(cursor, t0, out, origin)
            has_remove = any(sk.kinds[i] == LineKind.REMOVE for i in range(g0, g1 + 1))
            self._delete(t0, t1, by_remove=has_remove, dry=dry)
            self._emit_new([i for i in range(g0, g1 + 1) if sk.kinds[i] == LineKind.CODE], out, origin)
            cursor = t1
        if cursor < hi:
            self._keep(cursor, hi, out, origin)

    def _check_keep_range(self, first: int, upto: int, lo: int, hi: int) -> None:
        for i in range(first, upto):
            if self.sk.kinds[i] == LineKind.MARKER:
                self._check_keep(i, lo, hi)

    def _locate_group(self, g0: int, g1: int, lo: int, hi: int) -> tuple[int, int]:
        """The original region a group of remove comments and code lines replaces."""
        sk = self.sk
        removes = [i for i in range(g0, g1 + 1) if sk.kinds[i] == LineKind.REMOVE]
        if not removes:
            return self._locate_code(g0, g1, lo, hi)
        t0, t1 = hi, lo
        cursor = lo
        for i in removes:
            if i in self.dp_spans:
                span = self.dp_spans[i]
                t0, t1 = min(t0, span[0]), max(t1, span[1])
                cursor = span[1]
                continue
            target = self._locate_remove(sk.infos[i] or MarkerInfo(), cursor, hi, i, required=True)
            assert target is not None
            t0, t1 = min(t0, target[0]), max(t1, target[1])
            cursor = target[1]
        return t0, t1

    def _keep(self, lo: int, hi: int, out: list[str], origin: list[int]) -> None:
        out.extend(self.o.raw[lo:hi])
        origin.extend(range(lo, hi))

    def _delete(self, lo: int, hi: int, by_remove: bool, dry: bool = False, count: bool = True) -> None:
        if dry or not count or hi <= lo:
            return
        nonblank = sum(1 for p in range(lo, hi) if self.ok[p])
        if by_remove:
            self.deleted_by_remove += nonblank
        else:
            self.deleted_by_context += nonblank

    def _emit_new(self, js: Iterable[int], out: list[str], origin: list[int]) -> None:
        for j in js:
            if self.sk.kinds[j] != LineKind.CODE:
                continue
            if self.sm[j] >= 0:
                self._emit_matched(j, self.sm[j], out, origin)
            else:
                out.append(self._new_line(j))
                origin.append(-1)

    # ---- structure and fuzzy placement -----------------------------------------------

    def _replaced_header(self, post: list[int], lo: int, hi: int) -> int | None:
        """Where the original's header lines start that the block's new header replaces: the
        block's new lines end with a definition's signature (one line, or several ending in
        ``:`` / ``{``), and the lines right before its matched body are the original's
        signature of that definition (its first line names it, none is blank)."""
        if not post or hi - 1 < lo:
            return None
        sk, ok = self.sk, self.ok
        for i in range(len(post) - 1, max(len(post) - _MAX_HEADER, 0) - 1, -1):
            j = post[i]
            if not sk.keys[j] or self.sm[j] >= 0:
                return None
            if definition_name(sk.keys[j], self.language) is None:
                continue
            if i < len(post) - 1 and not sk.keys[post[-1]].endswith((":", "{")):
                return None
            for q in range(hi - 1, max(lo, hi - _MAX_HEADER) - 1, -1):
                if not ok[q]:
                    return None
                if self._same_definition(j, q):
                    return q if q == hi - 1 or ok[hi - 1].endswith((":", "{")) else None
            return None
        return None

    def _same_definition(self, j: int, p: int) -> bool:
        if self.sm[j] >= 0 or not self.sk.keys[j] or not self.ok[p]:
            return False
        new = definition_name(self.sk.keys[j], self.language)
        return new is not None and new == definition_name(self.ok[p], self.language)

    def _unfinished_definition(self, sep: int, lo: int, hi: int) -> int:
        """End of a definition the block before ``sep`` opened but a marker outside it closes.

        ``def bar():`` / ``return 10`` / ``# ... existing code ...`` at the header's level: the
        marker cannot stand for the rest of ``bar``'s old body, so the new body replaces it.
        """
        sk = self.sk
        j = sep - 1
        while j >= 0 and sk.kinds[j] == LineKind.CODE:
            if (sk.keys[j] and sk.widths[j] <= sk.widths[sep]
                    and (self.sm[j] < 0 or definition_name(sk.keys[j], self.language) is None)):
                return lo  # a line at the marker's level after the header: not inside one
            if (self.sm[j] >= 0 and sk.widths[j] >= sk.widths[sep]
                    and definition_name(sk.keys[j], self.language) is not None):
                end = self._definition_end(self.sm[j], self.n)
                if not lo < end <= hi:
                    return lo
                level = sk.widths[sep] - self.shift
                if any(self.ok[p] and self.owidth[p] <= level for p in range(lo, end - 1)):
                    return lo  # the old body has lines at the marker's level (a Go template
                    # string at column 0): the marker may well stand inside it
                return end
            j -= 1
        return lo

    def _check_keep(self, sep: int, lo: int, hi: int) -> None:
        info = self.sk.infos[sep]
        if info is None or not info.keep_name:
            return
        name = info.keep_name.split(".")[-1]
        pattern = re.compile(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])")
        if not any(pattern.search(self.ok[p]) for p in range(lo, hi)):
            raise Abstain(f"the marker keeps {info.keep_name!r} but the span it stands for "
                          f"does not contain it", self.sk.span(sep, sep))

    def _locate_remove(self, info: MarkerInfo, lo: int, hi: int, j: int,
                       required: bool) -> tuple[int, int] | None:
        span = self.sk.span(j, j)
        if info.remove_quotes:
            first = self._unique_line(info.remove_quotes[0], lo, hi, span, required)
            if first is None:
                return None
            if len(info.remove_quotes) == 1:
                return (first, first + 1)
            last_key = info.remove_quotes[-1].strip()
            ends = [p for p in range(first, hi) if self.ok[p] == last_key]
            if len(ends) > 1:  # "remove `a` … `b`" with two b's after a: which one?
                raise Abstain("the remove comment's last line occurs more than once after its "
                              "first", span)
            if ends:
                return (first, ends[0] + 1)
            if required:
                raise Abstain("the remove comment's last line is not in the original", span)
            return None
        if info.remove_name:
            found = self._definitions_named(info.remove_name.split(".")[-1].rstrip("()"), lo, hi)
            if len(found) == 1:
                return self._with_separating_blanks(*found[0], lo, hi)
            if required or len(found) > 1:
                why = "no definition" if not found else "more than one definition"
                raise Abstain(f"remove comment: {why} named {info.remove_name!r} there", span)
            return None
        if required:
            raise Abstain("the remove comment does not say what to remove", span)
        return None

    def _with_separating_blanks(self, t0: int, t1: int, lo: int, hi: int) -> tuple[int, int]:
        """A removed definition takes the blank lines after it with it (before it at the end
        of the file), so the blank lines between the definitions left stay as they were."""
        end = t1
        while end < hi and not self.ok[end]:
            end += 1
        if end > t1 or t1 < self.n:
            return t0, end
        while t0 - 1 >= lo and not self.ok[t0 - 1]:
            t0 -= 1
        return t0, t1

    def _quoted(self, key: str, lo: int, hi: int) -> list[int]:
        """Original lines in lo..hi equal to a remove comment's quoted line, or, when none
        is, those that contain it (a quote may be cut short)."""
        return [p for p in range(lo, hi) if self.ok[p] == key] or [
            p for p in range(lo, hi) if key and key in self.ok[p]]

    def _unique_line(self, quote: str, lo: int, hi: int, span: tuple[int, int],
                     required: bool) -> int | None:
        hits = self._quoted(quote.strip(), lo, hi)
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise Abstain(f"the remove comment's line {quote!r} occurs more than once there", span)
        if required:
            raise Abstain(f"the remove comment's line {quote!r} is not in the original", span)
        return None

    def _definitions_named(self, name: str, lo: int, hi: int) -> list[tuple[int, int]]:
        out = []
        for p in range(lo, hi):
            key = self.ok[p]
            if name in key:
                found = definition_name(key, self.language)
                if found and found[1] == name:
                    out.append((self._definition_start(p, lo), self._definition_end(p, hi)))
        return out

    def _definition_start(self, p: int, lo: int) -> int:
        return definition_start(self.ok, self.owidth, p, lo)

    def _definition_end(self, p: int, hi: int) -> int:
        return definition_end(self.ok, self.owidth, p, hi, self.language)

    def _locate_code(self, j0: int, j1: int, lo: int, hi: int) -> tuple[int, int]:
        """Where a block with no exact anchor between two markers goes, or abstain."""
        sk = self.sk
        span = sk.span(j0, j1)
        js = [j for j in range(j0, j1 + 1) if sk.keys[j] and sk.kinds[j] == LineKind.CODE]
        head = definition_name(sk.keys[js[0]], self.language) if js else None
        if head is not None:
            found = self._definitions_named(head[1], lo, hi)
            if len(found) == 1:
                self.fuzzy += 1
                if not self._opens_body(js, j1):
                    return found[0]
                # A changed header over a marker inside its body: the header line only.
                if len(js) == 1:
                    return self._header_line(head[1], *found[0])
                raise Abstain("a changed definition header is followed by part of its body",
                              span)
        if not self.options.fuzzy or not js:
            raise Abstain("a block between two markers has no line of the original to anchor on",
                          span)
        return self._fuzzy_region(js, lo, hi, span)

    def _opens_body(self, js: list[int], j1: int) -> bool:
        """Whether the marker after the group stands inside the group's first definition."""
        sk = self.sk
        nxt = j1 + 1
        return (nxt < self.m and sk.kinds[nxt] == LineKind.MARKER
                and sk.widths[nxt] > sk.widths[js[0]])

    def _header_line(self, name: str, t0: int, t1: int) -> tuple[int, int]:
        for p in range(t0, t1):
            found = definition_name(self.ok[p], self.language)
            if found and found[1] == name:
                return (p, p + 1)
        return (t0, t0 + 1)

    def _fuzzy_region(self, js: list[int], lo: int, hi: int, span: tuple[int, int]) -> tuple[int, int]:
        """The one contiguous original region the block's lines are edits of."""
        threshold = self.options.fuzzy_threshold
        sk = self.sk
        best: dict[int, list[tuple[float, int]]] = {}
        for j in js:
            key = sk.keys[j]
            cached = sk.similar_lines.get((j, lo, hi, threshold))
            if cached is not None:  # the near-tie readings ask again
                best[j] = cached
                continue
            scored = sorted(_similarities(key, self.ok, lo, hi, threshold, exact=True), reverse=True)
            best[j] = sk.similar_lines[j, lo, hi, threshold] = scored
        matched = {j: s[0] for j, s in best.items() if s}
        if not matched:
            raise Abstain("a block between two markers matches no line of the original", span)
        for j, (ratio, p) in matched.items():
            rivals = [q for r, q in best[j][1:] if r > ratio - 0.1 and q != p]
            if rivals:
                raise Abstain("a block between two markers is similar to more than one place", span)
        positions = [p for _, p in (matched[j] for j in js if j in matched)]
        if positions != sorted(positions):  # two new lines may rewrite one old line
            raise Abstain("a block between two markers matches the original out of order", span)
        t0, t1 = positions[0], positions[-1] + 1
        if t1 - t0 > len(js) + 2:
            raise Abstain("a block between two markers matches lines too far apart", span)
        self.fuzzy += 1
        return (t0, t1)


def _pick(values: np.ndarray, start: np.ndarray, prefer_right: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per row: the best of ``start`` (no predecessor, index -1) and the row's values, its
    index, and whether two of them tie (within ``_EPS``). Ties go to the earliest candidate,
    or the latest with ``prefer_right``."""
    top = np.maximum(values.max(axis=1), start)
    close = values > (top - _EPS)[:, None]
    start_close = start > top - _EPS
    tied = bool(((close.sum(axis=1) + start_close) > 1).any())
    width = values.shape[1]
    if prefer_right:
        last = width - 1 - np.argmax(close[:, ::-1], axis=1)
        arg = np.where(close.any(axis=1), last, -1)
    else:
        arg = np.where(start_close, -1, np.argmax(close, axis=1))
    rows = np.arange(values.shape[0])
    score = np.where(arg >= 0, values[rows, np.maximum(arg, 0)], start)
    return score, arg, tied


def _rewrites(new: list[str], old: list[str]) -> bool:
    """Whether every old line is similar to one of the new lines (similarity >= 0.6): a
    modification."""
    if not old or len(old) > len(new) or len(old) > 40:
        return False
    return all(_similarities(line, new, 0, len(new), 0.6) for line in old)


def _similarities(key: str, lines: list[str], lo: int, hi: int, threshold: float,
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


def _code_blocks(merger: _Merger) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of code lines in the sketch, between markers."""
    kinds, j = merger.sk.kinds, 0
    while j < merger.m:
        if kinds[j] != LineKind.CODE:
            j += 1
            continue
        start = j
        while j < merger.m and kinds[j] == LineKind.CODE:
            j += 1
        yield start, j


def _check_weak_blocks(merger: _Merger) -> None:
    """A block that changes something must hold one line that can anchor it: a block of
    braces, blank lines and ``return`` around new code lands wherever those lines repeat."""
    sk = merger.sk
    for start, j in _code_blocks(merger):
        keys = [(sk.keys[i], merger.sm[i] >= 0) for i in range(start, j) if sk.keys[i]]
        _check_reindent_only(merger, start, j)
        if any(not matched for _, matched in keys) and any(matched for _, matched in keys) \
                and all(_weak(key) and len(merger.pos[key]) > 1 for key, matched in keys if matched):
            raise Abstain("a block is anchored only by lines that repeat everywhere "
                          "(braces, blank lines)", sk.span(start, j - 1))


def _check_insertion_reading(merger: _Merger) -> None:
    """A block that deletes, between two of its matched lines, a definition the sketch does
    not name may also read as new code inserted whole between two adjacent original lines: its last lines where
    this reading put them, its first lines right before them, nothing deleted (or the
    mirror image). A new test that copies its neighbour reads both ways: its copied lines
    match the neighbour's, whose other lines then look deleted. Two readings, two files:
    abstain."""
    sk, sm, ok, language = merger.sk, merger.sm, merger.ok, merger.language
    defined: set[str] | None = None
    named: set[str] | None = None
    for start, end in _code_blocks(merger):
        inside = [j for j in range(start, end) if sm[j] >= 0]
        gone = [definition_name(ok[p], language) for a, b in zip(inside, inside[1:])
                for p in range(sm[a] + 1, sm[b]) if ok[p]]
        if not any(gone):
            continue
        if named is None:
            named = {name for _, name in _definitions_of(sk.keys, language)}
        if all(found is None or found[1] in named for found in gone):
            continue  # deletes no definition the sketch does not name
        keys = sk.keys[start:end]
        outer = min(sk.widths[j] for j in range(start, end) if sk.keys[j])
        for t, i in _insertion_splits(keys, ok, sm[start:end]):
            # the lines between are then new: an outermost definition the file has would be
            # a second one
            if defined is None:
                defined = {name for _, name in merger._definitions()}
            names = (definition_name(keys[x], language) for x in range(t, i)
                     if keys[x] and sk.widths[start + x] == outer)
            if not any(found is not None and found[1] in defined for found in names):
                raise Abstain("the block also reads as new code inserted between two adjacent "
                              "original lines, deleting nothing", sk.span(start, end - 1))


def _insertion_splits(keys: list[str], ok: list[str], placed: list[int]) -> Iterator[tuple[int, int]]:
    """(t, i): the block's last lines keys[i:] stay where ``placed`` has them and its first
    t lines are the t original lines right before them (or its first lines stay and its
    last lines follow them), with a line with text between t and i."""
    size = len(keys)
    for i in range(size - 1, 0, -1):  # last lines kept in place, first lines moved down
        s = placed[i]
        if s < 0 or any(placed[x] != s + x - i for x in range(i, size)):
            break
        for t in range(1, i):
            if s - t >= 0 and placed[t - 1] != s - 1 and any(keys[t:i]) \
                    and ok[s - t:s] == keys[:t]:
                yield t, i
    for t in range(1, size):  # first lines kept in place, last lines moved up
        s = placed[t - 1] + 1
        if s <= 0 or any(placed[x] != s - t + x for x in range(t)):
            break
        for i in range(size - 1, t, -1):
            if placed[i] != s and any(keys[t:i]) and ok[s:s + size - i] == keys[i:]:
                yield t, i


def _check_reindent_only(merger: _Merger, start: int, end: int) -> None:
    """A block of context lines only, landed where the original indents them differently:
    its one effect would be a re-indent, which a sketch writes with the code that causes it
    (a new ``if`` around them). More likely the block belongs where the indentation agrees."""
    sk, sm = merger.sk, merger.sm
    lines = [i for i in range(start, end) if sk.keys[i]]
    if not lines or any(sm[i] < 0 for i in lines):
        return
    if any(sk.widths[i] - merger.shift != merger.owidth[sm[i]] for i in lines):
        raise Abstain("a block of unchanged lines would only change their indentation",
                      sk.span(lines[0], lines[-1]))


def _check_unmatched_edges(merger: _Merger) -> None:
    """A block's edge line next to a marker is usually context. Left unmatched although the
    original has it between the anchors around the block, it says the block may belong
    where that line is: the placement chosen is one reading of two."""
    sk, sm = merger.sk, merger.sm
    before = -1
    for start, j in _code_blocks(merger):
        after = next((sm[i] for i in range(j, merger.m) if sm[i] >= 0), merger.n)
        body = [i for i in range(start, j) if sk.keys[i]]
        if body and any(sm[i] >= 0 for i in body):
            for edge in {body[0], body[-1]}:
                key = sk.keys[edge]
                if sm[edge] >= 0 or _weak(key) or not sk.boundary[edge]:
                    continue
                if any(before < p < after for p in merger.pos.get(key, ())):
                    raise Abstain("a block's edge line is in the original but the block was "
                                  "placed elsewhere", sk.span(edge, edge))
        before = max([before] + [sm[i] for i in range(start, j)])


# Perturbed weights for the near-tie check: each moves one trade-off (deleting vs matching,
# keeping runs together) far enough to flip a placement that won by a hair.
# Cheaper deletions only: with the cross-check (a second reading) in place, the other two
# perturbations (dearer deletions, a stronger diagonal) caught no wrong answer this one
# misses on 9,744 benchmark sketches and cost 14% of the applier's time.
_NEAR_TIE_WEIGHTS = (Weights(delete=0.1, delete_blank=0.025),)


def _check_near_ties(out: list[str], first: _Merger) -> None:
    """Abstain when a placement changes under slightly different weights: the DP's choice
    was a near tie, so the sketch does not decide it (exact ties are caught in the DP)."""
    for weights in _NEAR_TIE_WEIGHTS:
        other = first.fork(weights)
        try:
            alt, _ = other.assemble(other.anchor())
        except Abstain:
            alt = None
        if alt != out:
            raise Abstain("ambiguous: another placement scores almost as well")


def _sketch_ends_file(merger: _Merger, origin: list[int]) -> bool:
    """Whether the merged file's last line is the sketch's last line (no marker after it
    kept more): then the sketch's own final newline, or its absence, is the file's."""
    sk = merger.sk
    last = len(sk.kinds) - 1
    while last >= 0 and sk.kinds[last] == IMPLICIT:
        last -= 1
    if last < 0 or sk.kinds[last] != LineKind.CODE or not origin:
        return False
    return origin[-1] == merger.sm[last]  # -1 == -1 when the line is new


def _cross_check(out: list[str], olines: Lines, sk: _Sketch, language: str | None,
                 options: ApplyOptions, first: _Merger | None = None) -> None:
    """Read the sketch a second, independent way (the global alignment of ``align``) and
    abstain when that reading gives another file. The two fail differently: the piecewise
    reading trusts its unique anchors and repairs gaps locally, the global one weighs every
    line of every block at once. Where both agree, a wrong merge needs both to be wrong in
    the same way; on the benchmark that cuts silent wrong answers by about a third for a
    small loss of exact merges (BENCHMARKS.md). An abstain of the global reading alone (two
    optimal readings) does not overrule a piecewise merge that passed its own checks."""
    second = first.fork() if first is not None else _Merger(olines, sk, language, options)
    try:
        alt, _ = second.merge_dp()
    except Abstain:
        return
    if alt != out and not _more_blank_lines_only(out, alt, first):
        at = next((i for i, (a, b) in enumerate(zip(out, alt)) if a != b), min(len(out), len(alt)))
        raise Abstain(f"two readings of the sketch give different files (from merged line "
                      f"{at + 1}); the sketch does not say which")


def _more_blank_lines_only(out: list[str], alt: list[str], first: _Merger | None) -> bool:
    """The readings differ in blank lines only, the piecewise one keeps more of them, and it
    guessed none (each blank line it wrote is the original's or the sketch's, none kept
    because the sketch seemed to drop it). The global reading's blank-line costs are a
    coarse model: on the benchmark the piecewise reading was exact in 227 of 291 such
    disagreements, the global one in 39, both wrong in 2."""
    if first is None or first.blank_guesses:
        return False
    text_out = [line for line in out if line.strip()]
    text_alt = [line for line in alt if line.strip()]
    return text_out == text_alt and len(out) > len(alt)


def merge(original: str, sketch: str, language: str | None, options: ApplyOptions,
          weights: Weights = DEFAULT_WEIGHTS) -> Merge:
    """Merge ``sketch`` into ``original``; raises ``Abstain`` when it cannot do so safely."""
    olines = split_lines(original)
    slines = split_lines(_strip_fences(sketch))
    okeys = set(olines.keys)
    sk = _Sketch(slines, okeys, language)
    if not any(k for j, k in enumerate(sk.keys) if sk.kinds[j] == LineKind.CODE) and not any(
        kind == LineKind.REMOVE for kind in sk.kinds
    ):
        raise Abstain("the sketch has no code, only markers", (1, max(len(slines.raw), 1)))
    merger = _Merger(olines, sk, language, options, weights)
    fixed = merger.anchor()
    out, origin = merger.assemble(fixed)
    if merger.blank_guesses and out == olines.raw:
        # Read as noise, the sketch's shorter blank runs leave it changing nothing, and a
        # sketch that changes nothing is not sent: the blank lines are the edit.
        literal = merger.fork()
        literal.keep_short_blanks = False
        literal_out, literal_origin = literal.assemble(literal.anchor())
        if literal_out != out:
            merger, out, origin = literal, literal_out, literal_origin
    _check_weak_blocks(merger)
    _check_unmatched_edges(merger)
    _check_insertion_reading(merger)
    if merger.searched and weights is DEFAULT_WEIGHTS:
        _check_near_ties(out, merger)
    if (options.cross_check and weights is DEFAULT_WEIGHTS
            and len(sk.keys) * (len(olines.keys) + 1) <= _align.MAX_CELLS):
        _cross_check(out, olines, sk, language, options, merger)
    final_newline = olines.final_newline
    if _sketch_ends_file(merger, origin):
        final_newline = slines.final_newline  # the sketch wrote the file's last line
    return Merge(
        lines=olines,
        out=out,
        origin=origin,
        deleted_by_context=merger.deleted_by_context,
        deleted_by_remove=merger.deleted_by_remove,
        fuzzy=merger.fuzzy,
        blank_guesses=merger.blank_guesses,
        final_newline=final_newline,
    )
