"""Global alignment of a sketch to the original: the cheapest reading of the whole sketch.

The sketch is read as one path through (sketch line, original line) space. A code line either
matches an equal original line (free; a little dearer when its indentation disagrees with
the sketch's after the uniform shift) or is new (costs an insertion); original lines that no
marker keeps and no sketch line matches are deleted (costs a deletion, dearer than an
insertion: losing code is the failure users fear most). A marker keeps a non-empty run of
original lines for free, a little dearer when the run does not start at the marker's own
indentation (writers put a marker where the code it stands for starts). A ``remove``
comment deletes the lines it names. The cheapest path is the edit the sketch states with
the fewest changes: every block is placed by all of its lines and by the order of all the
blocks at once, not by one anchor line at a time.

Two optimal paths are traced back, one that places everything as early as it can and one
as late: when they give different files the sketch reads two ways at the same cost, and the
caller abstains (or lets structure decide). Costs are integers so that ties are exact.

Work and memory are O(sketch lines x original lines): seven int64 rows of length n + 1 per
sketch line are kept for the trace-back (56 bytes a cell), so ``MAX_CELLS`` (2 M cells,
about 110 MB) bounds it; beyond that the caller keeps the piecewise reading alone.
"""

from __future__ import annotations

from collections import _count_elements  # type: ignore[attr-defined]
from dataclasses import dataclass
from typing import Callable

import numpy as np

from specialists.apply import align_kernel
from specialists.apply.markers import LineKind

__all__ = ["Alignment", "Costs", "align", "warm", "MAX_CELLS"]

MAX_CELLS = 2_000_000
_INF = np.int64(1) << 50
_NONE = np.empty(0, dtype=np.int64)
IMPLICIT = 3  # same value as sketch_lines.IMPLICIT: a marker the sketch left out (may keep nothing)


@dataclass(frozen=True)
class Costs:
    insert: int = 20  # a new non-blank sketch line
    insert_open: int = 20  # once per run of new lines
    insert_blank: int = 0  # where a new blank line goes is layout, not evidence: leave ties
    delete: int = 40  # an original non-blank line deleted by context
    delete_blank: int = 10
    delete_open: int = 20  # once per run of deleted lines
    indent: int = 9  # a matched line whose indentation disagrees with the sketch's
    marker_indent: int = 100  # a marker's run starts at another indentation than the marker
    duplicate: int = 40  # a new line equal to an original line (not trivial) a few lines away
    near: int = 6  # ... at most this many lines from where it is inserted
    unchanged: int = 200  # a block that changes nothing
    insert_next_to_marker: int = 100  # the line right next to a marker, in the original, as new
    substitute: int = 25  # a new line in place of a similar original line
    marker_empty: int = 40  # a marker that keeps nothing (a trailing "# ..." after the end)
    edge: int = 5000  # a block's edge line next to a marker, found in the original, not matched


@dataclass
class Alignment:
    """One optimal path: each sketch line's original line (-1 when new) and each
    separator's original run (start, end)."""

    sm: list[int]
    spans: dict[int, tuple[int, int]]
    cost: int


def _first_nonblank_widths(oblank: np.ndarray, ow: np.ndarray) -> np.ndarray:
    """Each position's next non-blank line's width (itself when non-blank), -1 past the last."""
    n = len(ow)
    nxt = np.full(n + 1, n, dtype=np.int64)
    nonblank = np.flatnonzero(~oblank)
    nxt[nonblank] = nonblank
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    return np.append(ow, -1)[nxt]


def align(okeys: list[str], owidths: list[int], skeys: list[str], kinds: list[int],
          swidths: list[int], shift: int, removes: dict[int, list[tuple[int, int]]],
          weak: Callable[[str], bool], costs: Costs | None = None) -> tuple[Alignment, Alignment]:
    """The earliest and the latest optimal alignment (equal when the sketch reads one way).

    ``removes`` maps each remove comment's sketch index to the original runs it may delete;
    ``weak`` tells lines too common to anchor on (braces, ``else:``). Raises ``ValueError``
    when no reading exists (a remove comment with nowhere to go).
    """
    problem = _Problem(okeys, owidths, skeys, kinds, swidths, shift, removes, weak,
                       costs or Costs())
    problem.forward()
    early = problem.trace(late=False)
    # A trace that never met two equal choices is the only optimal path: the latest is it.
    return early, problem.trace(late=True) if problem.branched else early


def warm() -> None:
    """Load (or, on a cold cache, compile: about 4 s) the compiled forward pass now rather
    than on the first sketch (about 0.5 CPU s from the cache)."""
    align(["a", "b"], [0, 0], ["a", "x", "b"], [0, 0, 0], [0, 0, 0], 0, {},
          lambda key: False)


_Row = np.ndarray  # (F0, F1, FI) over original positions: rows[j]


class _Problem:
    """One sketch against one original: the cost tables, the forward pass, the trace-back.

    States before each sketch item, one array over original positions 0..n each: F0 (the
    current block has changed nothing yet), F1 (changed; last step a match, a rewrite or a
    deletion), FI (changed; last step an insertion). Insertions and deletions pay their
    ``*_open`` cost once per run: new code comes in runs, and a run that copies old lines
    must not be shredded into matches against the lines it copied.
    """

    def __init__(self, okeys: list[str], owidths: list[int], skeys: list[str], kinds: list[int],
                 swidths: list[int], shift: int, removes: dict[int, list[tuple[int, int]]],
                 weak: Callable[[str], bool], costs: Costs) -> None:
        self.okeys, self.owidths, self.skeys, self.kinds = okeys, owidths, skeys, kinds
        self.swidths, self.shift, self.removes, self.weak, self.costs = (
            swidths, shift, removes, weak, costs)
        self.n = n = len(okeys)
        self.m = m = len(skeys)
        # each distinct key's id, in order of first occurrence
        self.ids = ids = dict(zip(dict.fromkeys(okeys), range(n)))
        self.oid = np.fromiter(map(ids.__getitem__, okeys), dtype=np.int64, count=n)
        self.ow = np.asarray(owidths, dtype=np.int64)
        # the positions of each id, ascending, as slices of one array: by[at[i]:at[i + 1]]
        self.by = np.argsort(self.oid, kind="stable")
        self.by1 = self.by + 1
        self.by_w = self.ow[self.by]
        self.at = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.oid, minlength=len(ids)), out=self.at[1:])
        self.lens = np.fromiter(map(len, okeys), dtype=np.int64, count=n)
        oblank = self.lens == 0
        dcost = np.where(oblank, costs.delete_blank, costs.delete).astype(np.int64)
        self.D = np.zeros(n + 1, dtype=np.int64)  # D[p]: deleting lines 0..p-1
        np.cumsum(dcost, out=self.D[1:])
        self.fnb = _first_nonblank_widths(oblank, self.ow)
        self.by_head: dict[tuple[int, str], list[int]] = {}  # same_head's answers
        self.joined: str | None = None
        self.starts = _NONE
        self.char_counts: dict[int, dict[str, int]] = {}  # original line: its characters
        self.insert_rules: dict[int, tuple[int, bool]] = {}
        self.branched = False  # whether a trace met two equally good choices
        self._edges()
        # A block that changes nothing is not something a writer sends, so ending one costs
        # ``unchanged``: it stops a block of context from sliding onto a look-alike spot
        # where the edit it shows would vanish. has_block[j]: code precedes item j since the
        # last separator.
        self.has_block = [False] * (m + 1)
        for j in range(m):
            self.has_block[j + 1] = kinds[j] == LineKind.CODE or (
                self.has_block[j] and kinds[j] == LineKind.REMOVE)
        # rows[j]: (F0, F1, FI) before item j, and after the last; rows_h[j]: a code or
        # remove row's (A0, A1, AI, M1), a marker's (block end, that plus its indentation
        # penalty, unused, unused); a left-out last marker's is unused
        self.rows = np.empty((m + 1, 3, n + 1), dtype=np.int64)
        self.rows_h = np.empty((m, 4, n + 1), dtype=np.int64)
        self.total = 0

    def _edges(self) -> None:
        """A block's first (last) line with text next to a marker is context: the marker's run
        ends (starts) right there. When the original has that line, reading it as new code
        would keep the run the sketch replaced and repeat the line."""
        kinds, skeys, m = self.kinds, self.skeys, self.m
        self.edge_rows: set[int] = set()
        self.next_to_marker: set[int] = set()  # the lines right next to a marker, blank too
        for j in range(m):
            if kinds[j] != LineKind.MARKER:
                continue  # a left-out marker may be the file's end; a remove comment is exact
            for step in (1, -1):
                i = j + step
                if 0 <= i < m and kinds[i] == LineKind.CODE:
                    self.next_to_marker.add(i)
                while 0 <= i < m and kinds[i] == LineKind.CODE and not skeys[i]:
                    i += step  # blank lines: look at the first line with text
                if 0 <= i < m and kinds[i] == LineKind.CODE and skeys[i] in self.ids:
                    self.edge_rows.add(i)
        # A sketch that starts with code whose first line the original does not have starts
        # the file (no first marker was left out): nothing is kept before it.
        self.no_first_run = False
        if m and kinds[0] == IMPLICIT:
            first = next((i for i in range(1, m) if kinds[i] == LineKind.CODE and skeys[i]), None)
            self.no_first_run = first is not None and skeys[first] not in self.ids

    # ---- costs --------------------------------------------------------------------------

    def match_positions(self, j: int) -> np.ndarray:
        i = self.ids.get(self.skeys[j])
        if i is None:
            return _NONE
        return self.by[self.at[i]:self.at[i + 1]]

    def indent_pen(self, j: int, p: int) -> int:
        """A matched line whose indentation disagrees with the sketch's (after the shift)."""
        return self.costs.indent if (self.skeys[j]
                                     and self.owidths[p] != self.swidths[j] - self.shift) else 0

    def same_head(self, width: int, head: str) -> list[int]:
        """Original lines at this indentation whose first word starts with ``head`` (the
        first word cut to 12 characters): found by searching the joined keys (lines never
        hold a newline) rather than by an index of every line's first word, since a sketch
        asks for a few heads only."""
        cached = self.by_head.get((width, head))
        if cached is not None:
            return cached
        if self.joined is None:
            self.joined = "\n" + "\n".join(self.okeys) + "\n"  # a newline before every line
            self.starts = np.zeros(self.n, dtype=np.int64)
            np.cumsum(self.lens[:-1] + 1, out=self.starts[1:])
        # a head under 12 characters is the whole first word: whitespace (``isspace``, what
        # ``split`` cuts at; the newline after the line too) follows it
        joined, needle = self.joined, "\n" + head
        whole_word = len(head) < 12
        offsets = []
        at = joined.find(needle)
        while at >= 0:
            if not whole_word or joined[at + len(needle)].isspace():
                offsets.append(at)
            at = joined.find(needle, at + 1)
        found: list[int] = []
        if offsets:
            ps = np.searchsorted(self.starts, offsets)
            found = ps[self.ow[ps] == width].tolist()
        self.by_head[(width, head)] = found
        return found

    def similar(self, j: int) -> np.ndarray:
        """Original lines a new sketch line may rewrite: same indentation, same first word,
        and similar (difflib quick_ratio >= 0.7). A rewrite costs less than a deletion and an
        insertion, so of two places a block fits, the one where its new lines modify old ones
        wins."""
        key = self.skeys[j]
        if not key or key in self.ids or self.weak(key):
            return _NONE
        found = self.same_head(self.swidths[j] - self.shift, key.split(None, 1)[0][:12])
        if not found:
            return _NONE
        # difflib's real_quick_ratio and quick_ratio (a SequenceMatcher would also index
        # the key for the full ratio, which is never asked): the same values, the same
        # float arithmetic (2.0 * matches / length), counted with Counter in C
        lb = len(key)
        bcount: dict[str, int] = {}
        _count_elements(bcount, key)  # Counter's own C loop, without Counter's checks
        bget = bcount.get
        counts = self.char_counts
        out = []
        for p in found[:64]:
            okey = self.okeys[p]
            length = len(okey) + lb
            if 2.0 * min(len(okey), lb) / length < 0.7:
                continue
            acount = counts.get(p)
            if acount is None:
                acount = counts[p] = {}
                _count_elements(acount, okey)
            matches = 0
            for ch, k in acount.items():
                b = bget(ch, 0)
                matches += k if k < b else b  # noqa: FURB136 - no call per character
            if 2.0 * matches / length >= 0.7:
                out.append(p)
        return np.asarray(out, dtype=np.int64)

    def insert_rule(self, j: int) -> tuple[int, bool]:
        """Inserting line j: its cost, and whether it costs ``duplicate`` more within
        ``near`` lines of a copy the original has (reading the sketch as repeating code it
        only meant as context: the kept run ends where the copy starts)."""
        rule = self.insert_rules.get(j)
        if rule is None:
            rule = self.insert_rules[j] = self._insert_rule(j)
        return rule

    def _insert_rule(self, j: int) -> tuple[int, bool]:
        costs, key = self.costs, self.skeys[j]
        if j in self.edge_rows:
            return costs.edge, False
        if j in self.next_to_marker and key in self.ids:
            return costs.insert_next_to_marker, False
        if not key:
            return costs.insert_blank, False
        if not len(self.match_positions(j)) or self.weak(key):
            return costs.insert, False
        return costs.insert, True

    def insert_cost_at(self, j: int, q: int) -> int:
        """Inserting line j after original position q (``q`` lines kept or deleted before it)."""
        base, dup = self.insert_rule(j)
        if not dup:
            return base
        found, near = self.match_positions(j), self.costs.near  # ascending
        i = int(np.searchsorted(found, q - near))  # the first copy at or after q - near
        return base + self.costs.duplicate if i < len(found) and found[i] <= q + near - 1 else base

    # ---- forward pass -------------------------------------------------------------------

    def block_end_at(self, f: np.ndarray, j: int, p: int) -> int:
        """The cost of ending item j's block at position p (``unchanged`` when it changed
        nothing), from the states before item j."""
        f0, changed = int(f[0][p]), min(int(f[1][p]), int(f[2][p]))
        if not self.has_block[j]:
            return min(f0, changed)
        return min(changed, f0 + self.costs.unchanged)

    def closes_block(self, j: int) -> bool:
        """Item j is a marker right after code or a remove comment: the lines between them
        belong to the marker's run, so nothing is deleted there (it would cost, and be
        undone by assembly, to make a block look changed)."""
        kinds = self.kinds
        if j == 0 or kinds[j - 1] == LineKind.MARKER or kinds[j - 1] == IMPLICIT:
            return False
        if kinds[j] == LineKind.MARKER:
            return True
        return kinds[j] == IMPLICIT and not self.is_left_out_end(j)

    def is_left_out_end(self, j: int) -> bool:
        return (self.kinds[j] == IMPLICIT and j == self.m - 1 and j > 0
                and self.kinds[j - 1] == LineKind.CODE)

    def forward(self) -> None:
        """Every row, by ``align_kernel.forward``; here the per-line inputs: each code line's
        matches (a slice of ``by``), insertion rule and rewrite candidates, each remove
        comment's runs."""
        m, kinds, ids, at, skeys = self.m, self.kinds, self.ids, self.at, self.skeys
        kk = np.empty(m, dtype=np.int64)
        lo = np.full(m, -1, dtype=np.int64)
        hi = np.full(m, -1, dtype=np.int64)
        ins_base = np.zeros(m, dtype=np.int64)
        ins_dup = np.zeros(m, dtype=np.bool_)
        subs: list[np.ndarray] = []
        subs_at = np.zeros(m + 1, dtype=np.int64)
        rem: list[tuple[int, int]] = []
        rem_at = np.zeros(m + 1, dtype=np.int64)
        closes = np.zeros(m, dtype=np.bool_)
        n_subs = 0
        for j in range(m):
            kind = kinds[j]
            closes[j] = self.closes_block(j)
            if kind == LineKind.CODE:
                i = ids.get(skeys[j])
                if i is not None:
                    lo[j], hi[j] = at[i], at[i + 1]
                else:
                    found = self.similar(j)
                    if len(found):
                        subs.append(found)
                        n_subs += len(found)
                ins_base[j], ins_dup[j] = self.insert_rule(j)
            elif kind == LineKind.REMOVE:
                rem += self.removes.get(j, ())
            elif self.is_left_out_end(j):
                kind = align_kernel.LEFT_OUT_END
            kk[j] = kind
            subs_at[j + 1] = n_subs
            rem_at[j + 1] = len(rem)
        c = self.costs
        costv = np.array([c.insert_open, c.delete_open, c.indent, c.marker_indent, c.near,
                          c.duplicate, c.unchanged, c.substitute, c.marker_empty], dtype=np.int64)
        rem_a = np.array(rem, dtype=np.int64).reshape(-1, 2)
        self.total = int(align_kernel.forward(
            kk, closes, np.array(self.has_block, dtype=np.bool_), self.D, costv, lo, hi,
            self.by, self.by_w, np.asarray(self.swidths, dtype=np.int64) - self.shift,
            np.fromiter(map(bool, skeys), dtype=np.bool_, count=m), ins_base, ins_dup,
            np.concatenate(subs) if subs else _NONE, subs_at, rem_a[:, 0].copy(),
            rem_a[:, 1].copy(), rem_at, self.fnb, self.no_first_run, self.rows, self.rows_h))
        if self.total >= _INF // 2:
            raise ValueError("no alignment")

    # ---- trace-back ---------------------------------------------------------------------

    def pick(self, options: list[int], late: bool) -> int:
        if len(options) > 1 and min(options) != max(options):
            self.branched = True  # the latest optimal path may differ from this one
        return max(options) if late else min(options)

    @staticmethod
    def state_of(f: _Row, at: int, value: int, allowed: tuple[int, ...] = (1, 2, 0)) -> int:
        for st in allowed:
            if int(f[st][at]) == value:
                return st
        raise AssertionError("no state gives the value")

    def matched(self, j: int, q: int, value: int, f: _Row) -> bool:
        if q < 1 or self.skeys[j] != self.okeys[q - 1]:
            return False
        return int(min(f[1][q - 1], f[2][q - 1])) + self.indent_pen(j, q - 1) == value

    def trace(self, late: bool) -> Alignment:
        """One optimal path, back from the end: each choice among equal costs goes to the
        latest (``late``) or the earliest original position."""
        m, n = self.m, self.n
        sm = [-1] * m
        spans: dict[int, tuple[int, int]] = {}
        f_end = self.rows[m]
        if min(int(f_end[1][n]), int(f_end[2][n])) == self.total:
            st = self.state_of(f_end, n, self.total, (1, 2))
        else:
            st = 0
        p, j = n, m - 1
        while j >= 0:
            kind = self.kinds[j]
            target = int(self.rows[j + 1][st][p])
            if kind == LineKind.CODE or kind == LineKind.REMOVE:
                p, st = self._trace_line(j, p, st, target, late, sm, spans)
                j -= 1
            elif self.is_left_out_end(j):
                p, st, j = self._trace_left_out_end(j, p, target, late, sm, spans)
            else:
                p, st = self._trace_marker(j, p, target, late, spans)
                j -= 1
        return Alignment(sm, spans, self.total)

    def _trace_line(self, j: int, p: int, st: int, target: int, late: bool, sm: list[int],
                    spans: dict[int, tuple[int, int]]) -> tuple[int, int]:
        f, D, costs = self.rows[j], self.D, self.costs
        A0, A1, AI, _ = self.rows_h[j]  # type: ignore[misc]
        if st == 0:
            q, hs = p, 0
        elif j + 1 < self.m and self.closes_block(j + 1):
            q, hs = p, st
        elif st == 2:
            q, hs = p, 2
        else:
            ends = (A1[: p + 1] - D[: p + 1] == target - D[p]).nonzero()[0].tolist()
            cands = [(q, 1) for q in ends]
            anyway = np.minimum(np.minimum(A0[:p], A1[:p]), AI[:p])
            cands += [(q, 3) for q in
                      (anyway - D[:p] == target - D[p] - costs.delete_open).nonzero()[0].tolist()]
            q = self.pick([c[0] for c in cands], late)
            hs = 1 if (q, 1) in cands else 3
        if hs == 3:  # deletions after any of the three
            value = int(min(A0[q], A1[q], AI[q]))
            hs = 0 if int(A0[q]) == value else (1 if int(A1[q]) == value else 2)
        hq = int((A0, A1, AI)[hs][q])
        if self.kinds[j] == LineKind.REMOVE:
            starts = [s for s, e in self.removes.get(j, ())
                      if e == q and min(int(f[0][s]), int(f[1][s]), int(f[2][s])) == hq]
            s = self.pick(starts, late)
            spans[j] = (s, q)
            return s, self.state_of(f, s, hq)
        if hs == 1 and not self.matched(j, q, hq, f):
            return q - 1, self.state_of(f, q - 1, hq - costs.substitute)  # a rewrite
        if hs in (0, 1):
            sm[j] = q - 1
            if hs == 0:
                return q - 1, 0
            return q - 1, self.state_of(f, q - 1, hq - self.indent_pen(j, q - 1), (1, 2))
        c = self.insert_cost_at(j, q)  # inserted
        if int(f[2][q]) + c == hq:
            return q, 2
        return q, self.state_of(f, q, hq - c - costs.insert_open, (1, 0))

    def _trace_left_out_end(self, j: int, p: int, target: int, late: bool, sm: list[int],
                            spans: dict[int, tuple[int, int]]) -> tuple[int, int, int]:
        f, n = self.rows[j], self.n
        A0, _, _, M1 = self.rows_h[j - 1]  # type: ignore[misc]
        if self.block_end_at(f, j, n) == target:
            spans[j] = (n, n)
            changed = min(int(f[1][n]), int(f[2][n]))
            st = self.state_of(f, n, target, (1, 2)) if changed == target else 0
            return p, st, j - 1
        ends = np.minimum(M1, A0 + self.costs.unchanged)
        s = self.pick((ends[:n] == target).nonzero()[0].tolist(), late)
        spans[j] = (s, n)
        sm[j - 1] = s - 1  # the last code line, matched right before the kept lines
        if int(M1[s]) == target:
            st = self.state_of(self.rows[j - 1], s - 1, target - self.indent_pen(j - 1, s - 1), (1, 2))
        else:
            st = 0
        return s - 1, st, j - 2

    def _trace_marker(self, j: int, p: int, target: int, late: bool,
                      spans: dict[int, tuple[int, int]]) -> tuple[int, int]:
        f, kind = self.rows[j], self.kinds[j]
        E, C = self.rows_h[j, 0], self.rows_h[j, 1]  # C: E plus the marker's indentation penalty
        if kind == IMPLICIT and j == 0 and self.no_first_run:
            if p > 0:  # the first line is new, and lines before it would go: say so
                raise ValueError("a sketch that starts with new code would delete the lines "
                                 "before its first match")
            spans[j] = (0, 0)
            return p, 0
        upto = p + 1 if kind == IMPLICIT else p
        found = (C[:upto] == target).nonzero()[0].tolist()
        if kind != IMPLICIT and int(E[p]) + self.costs.marker_empty == target:
            found.append(p)  # the marker keeps nothing
        s = self.pick(found, late)
        spans[j] = (s, p)
        value = int(E[s]) if (s < p or kind == IMPLICIT) else target - self.costs.marker_empty
        if min(int(f[1][s]), int(f[2][s])) == value:
            return s, self.state_of(f, s, value, (1, 2))
        return s, 0
