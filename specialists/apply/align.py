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

from dataclasses import dataclass
from typing import Callable

import numpy as np

from specialists.apply import align_kernel
from specialists.apply.markers import LineKind

__all__ = ["Alignment", "Costs", "align", "warm", "MAX_CELLS"]

MAX_CELLS = 2_000_000
_NONE = np.empty(0, dtype=np.int64)
# what ``str.isspace`` (and so ``str.split``) takes for whitespace, as code points
# (tests/apply/test_fast_paths.py checks this against every code point)
_SPACES = np.array([9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 133, 160, 5760, 8192, 8193, 8194,
                    8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287,
                    12288], dtype=np.uint32)
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
    """Load (or, on a cold cache, compile) the compiled kernels now rather than on the first
    sketch (``applier.warm``)."""
    align(["value = f(1)", "b"], [0, 0], ["value = f(2)", "b"], [0, 0], [0, 0], 0, {},
          lambda key: False)  # (a rewrite: ``similar``'s kernel too)


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
        self.okeys, self.skeys, self.kinds = okeys, skeys, kinds
        self.swidths, self.shift, self.removes, self.weak, self.costs = (
            swidths, shift, removes, weak, costs)
        self.n = n = len(okeys)
        self.m = m = len(skeys)
        # each distinct key's id, in order of first occurrence
        self.ids = ids = dict(zip(dict.fromkeys(okeys), range(n)))
        self.oid = np.fromiter(map(ids.__getitem__, okeys), dtype=np.int64, count=n)
        self.ow = np.asarray(owidths, dtype=np.int64)
        self.lens = np.fromiter(map(len, okeys), dtype=np.int64, count=n)
        # the positions of each id, ascending, as slices of one array: by[at[i]:at[i + 1]];
        # D[p]: deleting lines 0..p-1; fnb: each position's next non-blank line's width
        self.by, self.by_w, self.at, self.D, self.fnb = align_kernel.prepare(
            self.oid, self.ow, self.lens, len(ids), costs.delete, costs.delete_blank)
        self.codes: np.ndarray | None = None  # the keys' code points, one after another
        self.code_starts = _NONE
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

    def similar(self, j: int) -> np.ndarray:
        """Original lines a new sketch line may rewrite: same indentation, same first word
        (cut to 12 characters; the first 64 such lines), and similar (difflib's
        real_quick_ratio and quick_ratio >= 0.7). A rewrite costs less than a deletion and
        an insertion, so of two places a block fits, the one where its new lines modify old
        ones wins. Compiled (``align_kernel.similar``), over code points: the same values,
        the same float arithmetic as difflib."""
        key = self.skeys[j]
        if not key or key in self.ids or self.weak(key):
            return _NONE
        if self.codes is None:
            self.codes = np.frombuffer("".join(self.okeys).encode("utf-32-le", "surrogatepass"),
                                       dtype=np.uint32)
            self.code_starts = np.zeros(self.n, dtype=np.int64)
            np.cumsum(self.lens[:-1], out=self.code_starts[1:])
        out = np.empty(64, dtype=np.int64)
        k = align_kernel.similar(
            self.codes, self.code_starts, self.lens, self.ow, self.swidths[j] - self.shift,
            np.frombuffer(key.encode("utf-32-le", "surrogatepass"), dtype=np.uint32),
            len(key.split(None, 1)[0][:12]), _SPACES, out)
        return out[:k]

    def insert_rule(self, j: int) -> tuple[int, bool]:
        """Inserting line j: its cost, and whether it costs ``duplicate`` more within
        ``near`` lines of a copy the original has (reading the sketch as repeating code it
        only meant as context: the kept run ends where the copy starts)."""
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

    # ---- forward pass -------------------------------------------------------------------

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
        sid = np.full(m, -1, dtype=np.int64)  # a code line's key id (-1: not in the original)
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
                    sid[j] = i
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
        rem_a = np.array(rem, dtype=np.int64).reshape(-1, 2)
        self.inputs = a = dict(
            kinds=kk, closes=closes, has_block=np.array(self.has_block, dtype=np.bool_),
            costv=np.array([c.insert_open, c.delete_open, c.indent, c.marker_indent, c.near,
                            c.duplicate, c.unchanged, c.substitute, c.marker_empty],
                           dtype=np.int64),
            lo=lo, hi=hi, target=np.asarray(self.swidths, dtype=np.int64) - self.shift,
            keyed=np.fromiter(map(bool, skeys), dtype=np.bool_, count=m), ins_base=ins_base,
            ins_dup=ins_dup, rem_s=rem_a[:, 0].copy(), rem_e=rem_a[:, 1].copy(), rem_at=rem_at,
            sid=sid)
        self.total = int(align_kernel.forward(
            kk, closes, a["has_block"], self.D, a["costv"], lo, hi, self.by, self.by_w,
            a["target"], a["keyed"], ins_base, ins_dup, np.concatenate(subs) if subs else _NONE,
            subs_at, a["rem_s"], a["rem_e"], rem_at, self.fnb, self.no_first_run, self.rows,
            self.rows_h))
        if self.total >= align_kernel.INF // 2:
            raise ValueError("no alignment")

    # ---- trace-back ---------------------------------------------------------------------

    def trace(self, late: bool) -> Alignment:
        """One optimal path, back from the end (``align_kernel.trace``): each choice among
        equal costs goes to the latest (``late``) or the earliest original position."""
        m = self.m
        sm = np.empty(m, dtype=np.int64)
        span_s = np.empty(m, dtype=np.int64)
        span_e = np.empty(m, dtype=np.int64)
        has_span = np.empty(m, dtype=np.bool_)
        a = self.inputs
        error, branched = align_kernel.trace(
            late, self.rows, self.rows_h, self.D, a["kinds"], a["closes"], a["has_block"],
            a["costv"], a["sid"], self.oid, a["keyed"], a["target"], self.ow, a["ins_base"],
            a["ins_dup"], a["lo"], a["hi"], self.by, a["rem_s"], a["rem_e"], a["rem_at"],
            self.no_first_run, self.total, sm, span_s, span_e, has_span)
        if error == 1:
            raise ValueError("no reading: nowhere to place a line or a separator")
        if error:
            raise AssertionError("no state gives the value")
        self.branched = self.branched or bool(branched)
        at = np.flatnonzero(has_span)[::-1]  # entered as the trace met them: last first
        spans = dict(zip(at.tolist(), zip(span_s[at].tolist(), span_e[at].tolist())))
        return Alignment(sm.tolist(), spans, self.total)
