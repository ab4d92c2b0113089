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

from specialists.apply.markers import LineKind

__all__ = ["Alignment", "Costs", "align", "MAX_CELLS"]

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


_Row = tuple[np.ndarray, np.ndarray, np.ndarray]


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
        self.D_open = self.D[1:] + costs.delete_open  # a run of deletions opened after H
        self.fnb = _first_nonblank_widths(oblank, self.ow)
        self.inf_row = np.full(n + 1, _INF, dtype=np.int64)
        self.by_head: dict[tuple[int, str], list[int]] = {}  # same_head's answers
        self.joined: str | None = None
        self.starts = _NONE
        self.char_counts: dict[int, dict[str, int]] = {}  # original line: its characters
        self.insert_costs: dict[int, np.ndarray | int] = {}
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
        self.rows: list[_Row] = []  # (F0, F1, FI) before each item, and after the last
        self.rows_h: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None] = []
        # each marker's block_end and that plus its marker_pen (two of a row's four slots)
        self.marker_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
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

    def marker_pen(self, j: int) -> np.ndarray:
        if self.kinds[j] == IMPLICIT:
            return np.zeros(self.n + 1, dtype=np.int64)
        target = self.swidths[j] - self.shift
        fnb = self.fnb
        return np.where((fnb == -1) | (fnb == target), 0, self.costs.marker_indent).astype(np.int64)

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

    def insert_cost(self, j: int) -> np.ndarray | int:
        if j not in self.insert_costs:
            self.insert_costs[j] = self._insert_cost(j)
        return self.insert_costs[j]

    def _insert_cost(self, j: int) -> np.ndarray | int:
        """Inserting a copy of a line the original has a few lines away reads the sketch as
        repeating code it only meant as context (the kept run ends where the copy starts)."""
        costs, key, n = self.costs, self.skeys[j], self.n
        if j in self.edge_rows:
            return costs.edge
        if j in self.next_to_marker and key in self.ids:
            return costs.insert_next_to_marker
        if not key:
            return costs.insert_blank
        found = self.match_positions(j)
        if not len(found) or self.weak(key):
            return costs.insert
        if len(found) > 8:
            mark = (np.bincount(np.maximum(found - costs.near + 1, 0), minlength=n + 2)
                    - np.bincount(np.minimum(found + costs.near + 1, n + 1), minlength=n + 2))
            return costs.insert + costs.duplicate * (np.cumsum(mark[: n + 1]) > 0)
        # a few copies: their windows written directly (the same costs as the sweep above)
        out = np.full(n + 1, costs.insert, dtype=np.int64)
        for p in found.tolist():
            out[max(p - costs.near + 1, 0): min(p + costs.near + 1, n + 1)] = (
                costs.insert + costs.duplicate)
        return out

    # ---- forward pass -------------------------------------------------------------------

    def strict_deletions(self, H: np.ndarray) -> np.ndarray:
        """min over q < p of H[q] + D[p] - D[q]: at least one line deleted after H."""
        return self._strict_deletions_of(H.copy())

    def _strict_deletions_of(self, c: np.ndarray, opened: bool = False) -> np.ndarray:
        """``strict_deletions`` of a temporary H, which it overwrites; ``opened``: plus
        ``delete_open`` (the run of deletions opened after H) on every value."""
        np.subtract(c, self.D, out=c)
        np.minimum.accumulate(c, out=c)
        out = np.empty_like(c)
        if opened:
            out[0] = _INF + self.costs.delete_open
            np.add(c[:-1], self.D_open, out=out[1:])
        else:
            out[0] = _INF
            np.add(c[:-1], self.D[1:], out=out[1:])
        return out

    def block_end(self, f: _Row, j: int) -> np.ndarray:
        f0, f1, fi = f
        changed = np.minimum(f1, fi)
        if not self.has_block[j]:
            return np.minimum(f0, changed)
        return np.minimum(changed, f0 + self.costs.unchanged)

    def block_end_at(self, f: _Row, j: int, p: int) -> int:
        """``block_end(f, j)[p]``, for one position."""
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
        n, inf_row = self.n, self.inf_row
        F0 = inf_row.copy()
        F0[0] = 0
        f: _Row = (F0, self.strict_deletions(F0), inf_row)
        for j in range(self.m):
            if self.closes_block(j):
                f = (f[0], self.rows_h[j - 1][1], f[2])  # type: ignore[index]
            self.rows.append(f)
            kind = self.kinds[j]
            if kind == LineKind.CODE:
                f = self._code_row(j, f)
            elif kind == LineKind.REMOVE:
                f = self._remove_row(j, f)
            elif self.is_left_out_end(j):
                f = self._left_out_end_row(j, f)
            else:
                f = self._marker_row(j, f)
        self.rows.append(f)
        self.total = self.block_end_at(f, self.m, n)
        if self.total >= _INF // 2:
            raise ValueError("no alignment")

    def _code_row(self, j: int, f: _Row) -> _Row:
        F0, F1, FI = f
        costs, inf_row = self.costs, self.inf_row
        # (temporaries are updated in place; arrays kept in rows and rows_h never are)
        start = np.minimum(F0, F1)
        start += costs.insert_open
        if j == 1 and self.kinds[0] == IMPLICIT:
            # Lines kept before the first code line (a first marker left out) end where the
            # sketch's first line matches; a new first line starts the file.
            first = int(start[0])
            start = inf_row.copy()
            start[0] = first
        AI = np.minimum(start, FI, out=start)
        AI += self.insert_cost(j)
        # M1 (the fourth of rows_h): matches only (a left-out last marker needs one)
        i = self.ids.get(self.skeys[j])
        if i is not None:  # the original has the line (no rewrite: ``similar`` is empty)
            A0 = inf_row.copy()
            A1 = inf_row.copy()
            lo, hi = self.at[i], self.at[i + 1]
            ps = self.by[lo:hi]
            a0 = F0[ps]
            a1 = np.minimum(F1[ps], FI[ps])
            if self.skeys[j]:  # the indentation penalty
                pen = (self.by_w[lo:hi] != self.swidths[j] - self.shift) * costs.indent
                a0 += pen
                a1 += pen
            A0[self.by1[lo:hi]] = a0
            A1[self.by1[lo:hi]] = a1
            self.rows_h.append((A0, A1, AI, A1))
            anyway = np.minimum(A0, A1)
            np.minimum(anyway, AI, out=anyway)
        else:  # no match: A0 and M1 are all infinite (the shared row, never written)
            A0 = A1 = inf_row
            subs = self.similar(j)
            if len(subs):
                A1 = inf_row.copy()
                any_state = np.minimum(np.minimum(F0[subs], F1[subs]), FI[subs])
                np.minimum.at(A1, subs + 1, any_state + costs.substitute)
            self.rows_h.append((A0, A1, AI, inf_row))
            anyway = np.minimum(A1, AI)  # (A1 holds nothing above infinity: min(A0, A1) is A1)
        deleted = self._strict_deletions_of(anyway, opened=True)
        return A0, np.minimum(A1, deleted, out=deleted), AI

    def _remove_row(self, j: int, f: _Row) -> _Row:
        either = np.minimum(np.minimum(f[0], f[1]), f[2])
        A1 = self.inf_row.copy()
        for s, e in self.removes.get(j, ()):
            if either[s] < A1[e]:
                A1[e] = either[s]
        self.rows_h.append((self.inf_row, A1, self.inf_row, self.inf_row))
        return self.inf_row, self.D + np.minimum.accumulate(A1 - self.D), self.inf_row

    def _left_out_end_row(self, j: int, f: _Row) -> _Row:
        """The last marker left out: lines after the last code line are kept only when that
        line matched right before them; otherwise the sketch wrote the file's end."""
        n = self.n
        self.rows_h.append(None)
        A0, _, _, M1 = self.rows_h[j - 1]  # type: ignore[misc]
        ends = np.minimum(M1, A0 + self.costs.unchanged)
        G = self.inf_row.copy()
        G[n] = min(self.block_end_at(f, j, n), int(ends[:n].min()) if n else int(_INF))
        return G, self.inf_row, self.inf_row

    def _marker_row(self, j: int, f: _Row) -> _Row:
        self.rows_h.append(None)
        E = self.block_end(f, j)
        if self.kinds[j] == IMPLICIT and j == 0 and self.no_first_run:
            self.marker_rows[j] = (E, E)
            return E, self.inf_row, self.inf_row  # the sketch's first line starts the file
        Emp = E + self.marker_pen(j)
        self.marker_rows[j] = (E, Emp)  # for the trace-back
        if self.kinds[j] == IMPLICIT:
            return np.minimum.accumulate(Emp), self.inf_row, self.inf_row
        C = np.minimum.accumulate(Emp)
        F0 = np.minimum(np.concatenate(([_INF], C[:-1])), E + self.costs.marker_empty)
        return F0, self.inf_row, self.inf_row

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
        ins = self.insert_cost(j)  # inserted
        c = int(ins if isinstance(ins, int) else ins[q])
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
        E, C = self.marker_rows[j]  # C: E + marker_pen(j)
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
