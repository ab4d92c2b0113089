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

Work is O(sketch lines x original lines) numpy operations: one row of length n + 1 per
sketch line; ``MAX_CELLS`` bounds it (the caller falls back to piecewise anchoring).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from specialists.apply.markers import LineKind

__all__ = ["Alignment", "Costs", "align", "MAX_CELLS"]

MAX_CELLS = 6_000_000
_INF = np.int64(1) << 50
_NONE = np.empty(0, dtype=np.int64)
IMPLICIT = 3  # same value as merge.IMPLICIT: a marker the sketch left out (may keep nothing)


@dataclass(frozen=True)
class Costs:
    insert: int = 20  # a new non-blank sketch line
    insert_open: int = 20  # once per run of new lines
    insert_blank: int = 6
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


def _first_nonblank_widths(okeys: list[str], owidths: list[int]) -> np.ndarray:
    n = len(okeys)
    out = np.full(n + 1, -1, dtype=np.int64)
    nxt = -1
    for p in range(n - 1, -1, -1):
        if okeys[p]:
            nxt = owidths[p]
        out[p] = nxt
    return out


def align(okeys: list[str], owidths: list[int], skeys: list[str], kinds: list[int],
          swidths: list[int], shift: int, removes: dict[int, list[tuple[int, int]]],
          weak: Callable[[str], bool], costs: Costs | None = None) -> tuple[Alignment, Alignment]:
    """The earliest and the latest optimal alignment (equal when the sketch reads one way).

    ``removes`` maps each remove comment's sketch index to the original runs it may delete.
    """
    if costs is None:
        costs = Costs()
    n, m = len(okeys), len(skeys)
    ids: dict[str, int] = {}
    oid = np.empty(n, dtype=np.int64)
    for p, key in enumerate(okeys):
        oid[p] = ids.setdefault(key, len(ids))
    positions: dict[int, np.ndarray] = {}
    ow = np.asarray(owidths, dtype=np.int64)
    oblank = np.fromiter((not k for k in okeys), dtype=bool, count=n)
    dcost = np.where(oblank, costs.delete_blank, costs.delete).astype(np.int64)
    D = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(dcost, out=D[1:])
    fnb = _first_nonblank_widths(okeys, owidths)

    # A block's edge line next to a marker (its first/last line that is not trivial) is
    # context: the marker's run ends (starts) right there. When the original has that line,
    # reading it as new code would keep the run the sketch replaced and repeat the line.
    edge_rows: set[int] = set()
    next_to_marker: set[int] = set()  # the lines right next to a marker, trivial ones too
    for j in range(m):
        if kinds[j] != LineKind.MARKER:
            continue  # a left-out marker may be the file's end; a remove comment is exact
        for step in (1, -1):
            i = j + step
            if 0 <= i < m and kinds[i] == LineKind.CODE:
                next_to_marker.add(i)
            while 0 <= i < m and kinds[i] == LineKind.CODE and not skeys[i]:
                i += step  # blank lines: look at the first line with text
            if 0 <= i < m and kinds[i] == LineKind.CODE and ids.get(skeys[i]) is not None:
                edge_rows.add(i)
    # A sketch that starts with code whose first line the original does not have starts the
    # file (no first marker was left out): nothing is kept before it.
    no_first_run = False
    if m and kinds[0] == IMPLICIT:
        first = next((i for i in range(1, m) if kinds[i] == LineKind.CODE and skeys[i]), None)
        no_first_run = first is not None and ids.get(skeys[first]) is None

    # Original lines a new sketch line may rewrite: same indentation, same first word, and
    # similar (difflib quick_ratio >= 0.7). Rewriting costs less than deleting and inserting, so
    # of two places a block fits, the one where its new lines modify old ones wins.
    by_head: dict[tuple[int, str], list[int]] | None = None

    def similar(j: int) -> np.ndarray:
        nonlocal by_head
        key = skeys[j]
        if not key or ids.get(key) is not None or weak(key):
            return _NONE
        if by_head is None:
            by_head = {}
            for p, okey in enumerate(okeys):
                if okey:
                    by_head.setdefault((owidths[p], okey.split(None, 1)[0][:12]), []).append(p)
        found = by_head.get((swidths[j] - shift, key.split(None, 1)[0][:12]))
        if not found:
            return _NONE
        matcher = difflib.SequenceMatcher(None, "", key, autojunk=False)
        out = []
        for p in found[:64]:
            matcher.set_seq1(okeys[p])
            # quick_ratio (shared characters, any order) is enough among lines that already
            # share their indentation and first word; difflib's full ratio costs 4x more
            if matcher.real_quick_ratio() >= 0.7 and matcher.quick_ratio() >= 0.7:
                out.append(p)
        return np.asarray(out, dtype=np.int64)

    insert_costs: dict[int, np.ndarray | int] = {}

    def insert_cost(j: int) -> np.ndarray | int:
        if j not in insert_costs:
            insert_costs[j] = _insert_cost(j)
        return insert_costs[j]

    def _insert_cost(j: int) -> np.ndarray | int:
        """Inserting a copy of a line the original has a few lines away reads the sketch as
        repeating code it only meant as context (the kept run ends where the copy starts)."""
        key = skeys[j]
        if j in edge_rows:
            return costs.edge
        if j in next_to_marker and ids.get(key) is not None:
            return costs.insert_next_to_marker
        if not key:
            return costs.insert_blank
        found = match_positions(j)
        if weak(key) or not len(found):
            return costs.insert
        mark = np.zeros(n + 2, dtype=np.int64)
        np.add.at(mark, np.maximum(found - costs.near + 1, 0), 1)
        np.add.at(mark, np.minimum(found + costs.near + 1, n + 1), -1)
        return costs.insert + costs.duplicate * (np.cumsum(mark[: n + 1]) > 0)

    def match_positions(j: int) -> np.ndarray:
        key = skeys[j]
        i = ids.get(key)
        if i is None:
            return np.empty(0, dtype=np.int64)
        found = positions.get(i)
        if found is None:
            found = positions[i] = np.flatnonzero(oid == i)
        return found

    def match_pen(j: int, ps: np.ndarray) -> np.ndarray:
        if not skeys[j]:
            return np.zeros(len(ps), dtype=np.int64)
        return np.where(ow[ps] != swidths[j] - shift, costs.indent, 0).astype(np.int64)

    def marker_pen(j: int) -> np.ndarray:
        if kinds[j] == IMPLICIT:
            return np.zeros(n + 1, dtype=np.int64)
        target = swidths[j] - shift
        return np.where((fnb == -1) | (fnb == target), 0, costs.marker_indent).astype(np.int64)

    # A block that changes nothing is not something a writer sends, so ending one costs
    # ``unchanged``: it stops a block of context from sliding onto a look-alike spot where
    # the edit it shows would vanish.
    has_block = [False] * (m + 1)  # whether code lines precede item j since the last separator
    for j in range(m):
        has_block[j + 1] = kinds[j] == LineKind.CODE or (has_block[j] and kinds[j] == LineKind.REMOVE)
    inf_row = np.full(n + 1, _INF, dtype=np.int64)

    def strict_deletions(H: np.ndarray) -> np.ndarray:
        """min over q < p of H[q] + D[p] - D[q]: at least one line deleted after H."""
        c = np.minimum.accumulate(H - D)
        return D + np.concatenate(([_INF], c[:-1]))

    def block_end(f0: np.ndarray, f1: np.ndarray, fi: np.ndarray, j: int) -> np.ndarray:
        changed = np.minimum(f1, fi)
        if not has_block[j]:
            return np.minimum(f0, changed)
        return np.minimum(changed, f0 + costs.unchanged)

    # States before each item: F0 (block unchanged so far), F1 (changed; last step a match
    # or a deletion), FI (changed; last step an insertion). Insertions cost ``insert_open``
    # once per run: new code comes in runs, and a run that copies old lines must not be
    # shredded into matches against the lines it copied.
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    rows_h: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None] = []
    F0 = inf_row.copy()
    F0[0] = 0
    F1 = strict_deletions(F0)
    FI = inf_row
    def closes_block(j: int) -> bool:
        """Item j is a marker right after code or a remove comment: the lines between them
        belong to the marker's run, so nothing is deleted there (it would cost, and be
        undone, to make a block look changed)."""
        if j == 0 or kinds[j - 1] == LineKind.MARKER or kinds[j - 1] == IMPLICIT:
            return False
        if kinds[j] == LineKind.MARKER:
            return True
        return kinds[j] == IMPLICIT and not (j == m - 1 and kinds[j - 1] == LineKind.CODE)

    for j in range(m):
        if closes_block(j):
            F1 = rows_h[j - 1][1]  # type: ignore[index]
        rows.append((F0, F1, FI))
        kind = kinds[j]
        if kind == LineKind.CODE:
            ins = insert_cost(j)
            start = np.minimum(F0, F1) + costs.insert_open
            if j == 1 and kinds[0] == IMPLICIT:
                # Lines kept before the first code line (a first marker left out) end where the
                # sketch's first line matches; a new first line starts the file.
                first = int(start[0])
                start = inf_row.copy()
                start[0] = first
            AI = np.minimum(start, FI) + ins
            A0 = inf_row.copy()
            A1 = inf_row.copy()
            ps = match_positions(j)
            if len(ps):
                pen = match_pen(j, ps)
                A0[ps + 1] = F0[ps] + pen
                A1[ps + 1] = np.minimum(F1[ps], FI[ps]) + pen
            M1 = A1.copy()  # matches only (the last marker left out needs one)
            subs = similar(j)
            if len(subs):
                any_state = np.minimum(np.minimum(F0[subs], F1[subs]), FI[subs])
                np.minimum.at(A1, subs + 1, any_state + costs.substitute)
            rows_h.append((A0, A1, AI, M1))
            anyway = np.minimum(np.minimum(A0, A1), AI)
            F0, F1, FI = A0, np.minimum(A1, strict_deletions(anyway) + costs.delete_open), AI
        elif kind == LineKind.REMOVE:
            either = np.minimum(np.minimum(F0, F1), FI)
            A1 = inf_row.copy()
            for s, e in removes.get(j, ()):
                if either[s] < A1[e]:
                    A1[e] = either[s]
            rows_h.append((inf_row, A1, inf_row, inf_row))
            F0, F1, FI = inf_row, D + np.minimum.accumulate(A1 - D), inf_row
        elif kind == IMPLICIT and j == m - 1 and j > 0 and kinds[j - 1] == LineKind.CODE:
            # The last marker left out: lines after the last code line are kept only when that
            # line matched right before them.
            rows_h.append(None)
            A0, _, _, M1 = rows_h[j - 1]  # type: ignore[misc]
            ends = np.minimum(M1, A0 + costs.unchanged)
            E = block_end(F0, F1, FI, j)
            G = inf_row.copy()
            G[n] = min(int(E[n]), int(ends[:n].min()) if n else int(_INF))
            F0, F1, FI = G, inf_row, inf_row
        else:
            rows_h.append(None)
            C = np.minimum.accumulate(block_end(F0, F1, FI, j) + marker_pen(j))
            if kind == IMPLICIT and j == 0 and no_first_run:
                C = block_end(F0, F1, FI, j)  # the sketch's first line is new: nothing kept before it
            if kind == IMPLICIT:
                F0 = C
            else:
                F0 = np.minimum(np.concatenate(([_INF], C[:-1])),
                                block_end(F0, F1, FI, j) + costs.marker_empty)
            F1 = FI = inf_row
    rows.append((F0, F1, FI))
    total = int(block_end(F0, F1, FI, m)[n])
    if total >= _INF // 2:
        raise ValueError("no alignment")

    def matched(j: int, q: int, value: int, f: tuple[np.ndarray, np.ndarray, np.ndarray]) -> bool:
        if q < 1 or skeys[j] != okeys[q - 1]:
            return False
        pen = costs.indent if (skeys[j] and owidths[q - 1] != swidths[j] - shift) else 0
        return int(min(f[1][q - 1], f[2][q - 1])) + pen == value

    def pick(options: list[int], late: bool) -> int:
        return max(options) if late else min(options)

    def state_of(f: tuple[np.ndarray, np.ndarray, np.ndarray], at: int, value: int,
                 allowed: tuple[int, ...] = (1, 2, 0)) -> int:
        for st in allowed:
            if int(f[st][at]) == value:
                return st
        raise AssertionError("no state gives the value")

    def trace(late: bool) -> Alignment:
        sm = [-1] * m
        spans: dict[int, tuple[int, int]] = {}
        p = n
        f_end = rows[m]
        if int(np.minimum(f_end[1], f_end[2])[n]) == total:
            st = state_of(f_end, n, total, (1, 2))
        else:
            st = 0
        j = m - 1
        while j >= 0:
            f = rows[j]
            kind = kinds[j]
            target = int(rows[j + 1][st][p])
            if kind == LineKind.CODE or kind == LineKind.REMOVE:
                A0, A1, AI, _ = rows_h[j]  # type: ignore[misc]
                if st == 0:
                    q, hs = p, 0
                elif j + 1 < m and closes_block(j + 1):
                    q, hs = p, st
                elif st == 2:
                    q, hs = p, 2
                else:
                    cands = [(int(q), 1) for q in
                             np.flatnonzero(A1[: p + 1] - D[: p + 1] == target - D[p])]
                    anyway = np.minimum(np.minimum(A0, A1), AI)
                    cands += [(int(q), 3) for q in
                              np.flatnonzero(anyway[:p] - D[:p] == target - D[p] - costs.delete_open)]
                    q = pick([c[0] for c in cands], late)
                    hs = 1 if (q, 1) in cands else 3
                if hs == 3:  # deletions after any of the three
                    value = int(min(A0[q], A1[q], AI[q]))
                    hs = 0 if int(A0[q]) == value else (1 if int(A1[q]) == value else 2)
                hq = int((A0, A1, AI)[hs][q])
                if kind == LineKind.REMOVE:
                    starts = [s for s, e in removes.get(j, ())
                              if e == q and min(int(f[0][s]), int(f[1][s]), int(f[2][s])) == hq]
                    s = pick(starts, late)
                    spans[j] = (s, q)
                    p, st = s, state_of(f, s, hq)
                elif hs == 1 and not matched(j, q, hq, f):
                    # a new line in place of a similar old one (a modification)
                    sm[j] = -1
                    p = q - 1
                    st = state_of(f, p, hq - costs.substitute, (1, 2, 0))
                elif hs in (0, 1):
                    pen = costs.indent if (skeys[j] and owidths[q - 1] != swidths[j] - shift) else 0
                    sm[j] = q - 1
                    p = q - 1
                    st = 0 if hs == 0 else state_of(f, p, hq - pen, (1, 2))
                else:  # inserted
                    ins = insert_cost(j)
                    c = int(ins if isinstance(ins, int) else ins[q])
                    if int(f[2][q]) + c == hq:
                        st = 2
                    else:
                        st = state_of(f, q, hq - c - costs.insert_open, (1, 0))
                    p = q
                j -= 1
                continue
            if kind == IMPLICIT and j == m - 1 and j > 0 and kinds[j - 1] == LineKind.CODE:
                A0, _, _, M1 = rows_h[j - 1]  # type: ignore[misc]
                E = block_end(*f, j)
                if int(E[n]) == target:
                    spans[j] = (n, n)
                    st = state_of(f, n, target, (1, 2)) if int(np.minimum(f[1], f[2])[n]) == target else 0
                    j -= 1
                    continue
                ends = np.minimum(M1, A0 + costs.unchanged)
                s = pick([int(x) for x in np.flatnonzero(ends[:n] == target)], late)
                spans[j] = (s, n)
                sm[j - 1] = s - 1
                pen = costs.indent if (skeys[j - 1] and owidths[s - 1] != swidths[j - 1] - shift) else 0
                fp = rows[j - 1]
                if int(M1[s]) == target:
                    st = state_of(fp, s - 1, target - pen, (1, 2))
                else:
                    st = 0
                p = s - 1
                j -= 2
                continue
            mp = marker_pen(j)
            C = block_end(*f, j) + mp
            upto = p + 1 if kind == IMPLICIT else p
            if kind == IMPLICIT and j == 0 and no_first_run:
                upto = 1
            found = [int(x) for x in np.flatnonzero(C[:upto] == target)]
            if kind != IMPLICIT and int(block_end(*f, j)[p]) + costs.marker_empty == target:
                found.append(p)  # the marker keeps nothing
            s = pick(found, late)
            spans[j] = (s, p)
            value = int(C[s]) - int(mp[s]) if s < p or kind == IMPLICIT else target - costs.marker_empty
            if int(np.minimum(f[1], f[2])[s]) == value:
                st = state_of(f, s, value, (1, 2))
            else:
                st = 0
            p = s
            j -= 1
        return Alignment(sm, spans, total)

    return trace(False), trace(True)
