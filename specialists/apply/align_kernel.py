"""The global alignment's forward pass and trace-back, compiled (numba): one call each.

The rows are short (a few hundred original lines), so the numpy version spent its time in
the calls (about 25 a sketch line), not in the arithmetic. Every value here is the same
int64 arithmetic as before (``INF`` sums included), so costs, ties and both traces are
unchanged. ``cache=True`` keeps the machine code beside this module (or, where that folder
is read-only, in numba's per-user cache or ``NUMBA_CACHE_DIR``): a cold cache compiles in
a few seconds once; ``align.warm`` does it up front.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["forward", "CODE", "REMOVE", "MARKER", "IMPLICIT", "LEFT_OUT_END"]

INF = 1 << 50
CODE, MARKER, REMOVE, IMPLICIT = 0, 1, 2, 3  # markers.LineKind, sketch_lines.IMPLICIT
LEFT_OUT_END = 4  # the last marker left out right after code (``_Problem.is_left_out_end``)
# the order of the costs vector
(C_INSERT_OPEN, C_DELETE_OPEN, C_INDENT, C_MARKER_INDENT, C_NEAR, C_DUPLICATE, C_UNCHANGED,
 C_SUBSTITUTE, C_MARKER_EMPTY) = range(9)


@njit(cache=True, nogil=True)
def _block_end(F: np.ndarray, j: int, has_block: bool, unchanged: int, out: np.ndarray) -> None:
    for p in range(out.shape[0]):
        f0 = F[j, 0, p]
        changed = min(F[j, 1, p], F[j, 2, p])
        out[p] = min(changed, f0 + unchanged) if has_block else min(f0, changed)


@njit(cache=True, nogil=True)
def forward(kinds: np.ndarray, closes: np.ndarray, has_block: np.ndarray, D: np.ndarray,
            costv: np.ndarray, lo_a: np.ndarray, hi_a: np.ndarray, by: np.ndarray,
            by_w: np.ndarray, target: np.ndarray, keyed: np.ndarray, ins_base: np.ndarray,
            ins_dup: np.ndarray, subs: np.ndarray, subs_at: np.ndarray, rem_s: np.ndarray,
            rem_e: np.ndarray, rem_at: np.ndarray, fnb: np.ndarray, no_first_run: bool,
            F: np.ndarray, H: np.ndarray) -> int:
    """Fill F[j] (F0, F1, FI before item j, and after the last) and H[j] (a code or remove
    row's A0, A1, AI, M1; a marker's block end E and E plus its indentation penalty).
    Returns the total cost (``block_end_at`` of the last row at n)."""
    m = kinds.shape[0]
    N = D.shape[0]
    n = N - 1
    ins_open = costv[C_INSERT_OPEN]
    delete_open = costv[C_DELETE_OPEN]
    indent = costv[C_INDENT]
    near = costv[C_NEAR]
    unchanged = costv[C_UNCHANGED]
    # the first row: nothing read yet; deletions after the start
    for p in range(N):
        F[0, 0, p] = INF
        F[0, 2, p] = INF
    F[0, 0, 0] = 0
    F[0, 1, 0] = INF
    c = F[0, 0, 0] - D[0]  # the running minimum of F0 - D before p
    for p in range(1, N):
        F[0, 1, p] = c + D[p]
        c = min(c, F[0, 0, p] - D[p])
    for j in range(m):
        if closes[j]:
            for p in range(N):
                F[j, 1, p] = H[j - 1, 1, p]
        kind = kinds[j]
        if kind == CODE:
            f0, f1, fi = F[j, 0], F[j, 1], F[j, 2]
            a0, a1, ai, m1 = H[j, 0], H[j, 1], H[j, 2], H[j, 3]
            # AI: inserting the line, after a match or deletion (a run opened) or an insertion
            base = ins_base[j]
            for p in range(N):
                ai[p] = min(min(f0[p], f1[p]) + ins_open, fi[p]) + base
                a0[p] = INF
                a1[p] = INF
                m1[p] = INF
            if j == 1 and kinds[0] == IMPLICIT:
                # lines kept before the first code line (a first marker left out) end where
                # the sketch's first line matches; a new first line starts the file
                for p in range(1, N):
                    ai[p] = min(INF, fi[p]) + base
            if ins_dup[j]:  # a copy of the line within ``near`` lines costs ``duplicate``
                dup = costv[C_DUPLICATE]
                done = 0  # the windows come in ascending order: each position once
                for k in range(lo_a[j], hi_a[j]):
                    q = by[k]
                    for p in range(max(q - near + 1, done), min(q + near + 1, N)):
                        ai[p] += dup
                    done = max(done, min(q + near + 1, N))
            if lo_a[j] >= 0:  # the original has the line: A0, A1 (and M1) where it matches
                for k in range(lo_a[j], hi_a[j]):
                    q = by[k]
                    x0 = f0[q]
                    x1 = min(f1[q], fi[q])
                    if keyed[j] and by_w[k] != target[j]:
                        x0 += indent
                        x1 += indent
                    a0[q + 1] = x0
                    a1[q + 1] = x1
                    m1[q + 1] = x1
            else:  # rewrites of similar lines
                for k in range(subs_at[j], subs_at[j + 1]):
                    q = subs[k]
                    v = min(min(f0[q], f1[q]), fi[q]) + costv[C_SUBSTITUTE]
                    if v < a1[q + 1]:
                        a1[q + 1] = v
            # the next row; F1: A1, or at least one deletion (a run opened) after any state
            g0, g1, g2 = F[j + 1, 0], F[j + 1, 1], F[j + 1, 2]
            c = INF  # the running minimum of min(A0, A1, AI) - D before p
            for p in range(N):
                x0 = a0[p]
                x1 = a1[p]
                x2 = ai[p]
                g0[p] = x0
                g2[p] = x2
                g1[p] = min(x1, (INF if p == 0 else c) + D[p] + delete_open)
                v = min(min(x0, x1), x2) - D[p]
                c = v if p == 0 else min(c, v)
        elif kind == REMOVE:
            for p in range(N):
                H[j, 0, p] = INF
                H[j, 1, p] = INF
                H[j, 2, p] = INF
                H[j, 3, p] = INF
            for k in range(rem_at[j], rem_at[j + 1]):
                s = rem_s[k]
                e = rem_e[k]
                either = min(min(F[j, 0, s], F[j, 1, s]), F[j, 2, s])
                if either < H[j, 1, e]:
                    H[j, 1, e] = either
            c = H[j, 1, 0] - D[0]  # the running minimum of A1 - D up to p
            for p in range(N):
                c = min(c, H[j, 1, p] - D[p])
                F[j + 1, 0, p] = INF
                F[j + 1, 1, p] = D[p] + c
                F[j + 1, 2, p] = INF
        elif kind == LEFT_OUT_END:
            # lines after the last code line are kept only when it matched right before them
            for p in range(N):
                F[j + 1, 0, p] = INF
                F[j + 1, 1, p] = INF
                F[j + 1, 2, p] = INF
            f0 = F[j, 0, n]
            changed = min(F[j, 1, n], F[j, 2, n])
            g = min(changed, f0 + unchanged) if has_block[j] else min(f0, changed)
            ends = INF
            for p in range(n):
                ends = min(ends, min(H[j - 1, 3, p], H[j - 1, 0, p] + unchanged))
            F[j + 1, 0, n] = min(g, ends)
        else:  # a marker, written or left out
            _block_end(F, j, has_block[j], unchanged, H[j, 0])
            for p in range(N):
                F[j + 1, 1, p] = INF
                F[j + 1, 2, p] = INF
            if kind == IMPLICIT and j == 0 and no_first_run:
                for p in range(N):
                    H[j, 1, p] = H[j, 0, p]
                    F[j + 1, 0, p] = H[j, 0, p]
                continue
            if kind == IMPLICIT:
                for p in range(N):
                    H[j, 1, p] = H[j, 0, p]
            else:
                for p in range(N):
                    w = fnb[p]
                    pen = 0 if (w == -1 or w == target[j]) else costv[C_MARKER_INDENT]
                    H[j, 1, p] = H[j, 0, p] + pen
            c = H[j, 1, 0]
            if kind == IMPLICIT:
                for p in range(N):
                    c = min(c, H[j, 1, p])
                    F[j + 1, 0, p] = c
            else:
                marker_empty = costv[C_MARKER_EMPTY]
                F[j + 1, 0, 0] = min(INF, H[j, 0, 0] + marker_empty)
                for p in range(1, N):
                    c = min(c, H[j, 1, p - 1])
                    F[j + 1, 0, p] = min(c, H[j, 0, p] + marker_empty)
    f0 = F[m, 0, n]
    changed = min(F[m, 1, n], F[m, 2, n])
    return min(changed, f0 + unchanged) if has_block[m] else min(f0, changed)



@njit(cache=True, nogil=True)
def _state_of(F: np.ndarray, j: int, at: int, value: int, order: int) -> int:
    """Which state of F[j] at ``at`` holds ``value``: tried in the order 1, 2, 0 (``order``
    0), 1, 2 (1) or 1, 0 (2); -1 when none does."""
    if F[j, 1, at] == value:
        return 1
    if order != 2 and F[j, 2, at] == value:
        return 2
    if order != 1 and F[j, 0, at] == value:
        return 0
    return -1


@njit(cache=True, nogil=True)
def _pen(keyed: np.ndarray, ow: np.ndarray, target: np.ndarray, indent: int, j: int,
         p: int) -> int:
    """A matched line whose indentation disagrees with the sketch's (after the shift)."""
    return indent if (keyed[j] and ow[p] != target[j]) else 0


@njit(cache=True, nogil=True)
def trace(late: bool, F: np.ndarray, H: np.ndarray, D: np.ndarray, kinds: np.ndarray,
          closes: np.ndarray, has_block: np.ndarray, costv: np.ndarray, sid: np.ndarray,
          oid: np.ndarray, keyed: np.ndarray, target: np.ndarray, ow: np.ndarray,
          ins_base: np.ndarray, ins_dup: np.ndarray, lo_a: np.ndarray, hi_a: np.ndarray,
          by: np.ndarray, rem_s: np.ndarray, rem_e: np.ndarray, rem_at: np.ndarray,
          no_first_run: bool, total: int, sm: np.ndarray, span_s: np.ndarray,
          span_e: np.ndarray, has_span: np.ndarray) -> tuple[int, bool]:
    """One optimal path, back from the end: each choice among equal costs goes to the
    latest (``late``) or the earliest original position. Fills ``sm`` (each sketch line's
    original line, -1 when new) and each separator's span; returns (error, branched): error
    1 where no reading exists (``ValueError``), 2 where no state gives a value (a bug);
    branched, whether a choice met two different positions."""
    m = kinds.shape[0]
    n = D.shape[0] - 1
    ins_open = costv[C_INSERT_OPEN]
    delete_open = costv[C_DELETE_OPEN]
    indent = costv[C_INDENT]
    near = costv[C_NEAR]
    unchanged = costv[C_UNCHANGED]
    substitute = costv[C_SUBSTITUTE]
    marker_empty = costv[C_MARKER_EMPTY]
    branched = False
    for j in range(m):
        sm[j] = -1
        has_span[j] = False
    st = 0
    if min(F[m, 1, n], F[m, 2, n]) == total:
        st = _state_of(F, m, n, total, 1)
        if st < 0:
            return 2, branched
    p = n
    j = m - 1
    while j >= 0:
        kind = kinds[j]
        tgt = F[j + 1, st, p]
        if kind == CODE or kind == REMOVE:
            if st == 0:
                q, hs = p, 0
            elif j + 1 < m and closes[j + 1]:
                q, hs = p, st
            elif st == 2:
                q, hs = p, 2
            else:  # a match (or rewrite) right here, or deletions after any state
                want1 = tgt - D[p]
                want3 = tgt - D[p] - delete_open
                qmin, qmax = -1, -1
                for r in range(p + 1):
                    hit = H[j, 1, r] - D[r] == want1
                    if not hit and r < p:
                        hit = min(min(H[j, 0, r], H[j, 1, r]), H[j, 2, r]) - D[r] == want3
                    if hit:
                        if qmin < 0:
                            qmin = r
                        qmax = r
                if qmin < 0:
                    return 1, branched
                if qmin != qmax:
                    branched = True
                q = qmax if late else qmin
                hs = 1 if H[j, 1, q] - D[q] == want1 else 3
            if hs == 3:  # deletions after any of the three
                value = min(min(H[j, 0, q], H[j, 1, q]), H[j, 2, q])
                hs = 0 if H[j, 0, q] == value else (1 if H[j, 1, q] == value else 2)
            hq = H[j, hs, q]
            if kind == REMOVE:
                smin, smax = -1, -1
                for k in range(rem_at[j], rem_at[j + 1]):
                    s = rem_s[k]
                    if rem_e[k] == q and min(min(F[j, 0, s], F[j, 1, s]), F[j, 2, s]) == hq:
                        if smin < 0 or s < smin:
                            smin = s
                        if s > smax:
                            smax = s
                if smin < 0:
                    return 1, branched
                if smin != smax:
                    branched = True
                s = smax if late else smin
                has_span[j] = True
                span_s[j] = s
                span_e[j] = q
                p = s
                st = _state_of(F, j, s, hq, 0)
            elif hs == 1 and not (q >= 1 and sid[j] >= 0 and oid[q - 1] == sid[j] and (
                    min(F[j, 1, q - 1], F[j, 2, q - 1])
                    + _pen(keyed, ow, target, indent, j, q - 1) == hq)):
                p = q - 1  # a rewrite
                st = _state_of(F, j, q - 1, hq - substitute, 0)
            elif hs == 0 or hs == 1:
                sm[j] = q - 1
                p = q - 1
                if hs == 0:
                    st = 0
                else:
                    st = _state_of(F, j, q - 1, hq - _pen(keyed, ow, target, indent, j, q - 1),
                                   1)
            else:  # inserted
                c = ins_base[j]
                if ins_dup[j]:  # a copy of the line within ``near`` lines
                    for k in range(lo_a[j], hi_a[j]):
                        if q - near <= by[k] <= q + near - 1:
                            c += costv[C_DUPLICATE]
                            break
                p = q
                if F[j, 2, q] + c == hq:
                    st = 2
                else:
                    st = _state_of(F, j, q, hq - c - ins_open, 2)
            if st < 0:
                return 2, branched
            j -= 1
        elif kind == LEFT_OUT_END:
            f0 = F[j, 0, n]
            changed = min(F[j, 1, n], F[j, 2, n])
            ended = min(changed, f0 + unchanged) if has_block[j] else min(f0, changed)
            if ended == tgt:  # the sketch wrote the file's end
                has_span[j] = True
                span_s[j] = n
                span_e[j] = n
                st = 0
                if changed == tgt:
                    st = _state_of(F, j, n, tgt, 1)
                    if st < 0:
                        return 2, branched
                j -= 1
                continue
            smin, smax = -1, -1
            for s in range(n):
                if min(H[j - 1, 3, s], H[j - 1, 0, s] + unchanged) == tgt:
                    if smin < 0:
                        smin = s
                    smax = s
            if smin < 0:
                return 1, branched
            if smin != smax:
                branched = True
            s = smax if late else smin
            has_span[j] = True
            span_s[j] = s
            span_e[j] = n
            sm[j - 1] = s - 1  # the last code line, matched right before the kept lines
            st = 0
            if H[j - 1, 3, s] == tgt:
                st = _state_of(F, j - 1, s - 1,
                               tgt - _pen(keyed, ow, target, indent, j - 1, s - 1), 1)
                if st < 0:
                    return 2, branched
            p = s - 1
            j -= 2
        else:  # a marker: H[j] holds its block end E and C, E plus its indentation penalty
            if kind == IMPLICIT and j == 0 and no_first_run:
                if p > 0:  # the first line is new, and lines before it would go
                    return 1, branched
                has_span[j] = True
                span_s[j] = 0
                span_e[j] = 0
                st = 0
                j -= 1
                continue
            upto = p + 1 if kind == IMPLICIT else p
            smin, smax = -1, -1
            for s in range(upto):
                if H[j, 1, s] == tgt:
                    if smin < 0:
                        smin = s
                    smax = s
            if kind != IMPLICIT and H[j, 0, p] + marker_empty == tgt:  # it keeps nothing
                if smin < 0:
                    smin = p
                smax = p
            if smin < 0:
                return 1, branched
            if smin != smax:
                branched = True
            s = smax if late else smin
            has_span[j] = True
            span_s[j] = s
            span_e[j] = p
            value = H[j, 0, s] if (s < p or kind == IMPLICIT) else tgt - marker_empty
            st = 0
            if min(F[j, 1, s], F[j, 2, s]) == value:
                st = _state_of(F, j, s, value, 1)
                if st < 0:
                    return 2, branched
            p = s
            j -= 1
    return 0, branched


@njit(cache=True, nogil=True)
def similar(codes: np.ndarray, starts: np.ndarray, lens: np.ndarray, ow: np.ndarray,
            width: int, key: np.ndarray, head: int, spaces: np.ndarray,
            out: np.ndarray) -> int:
    """Original lines a new sketch line ``key`` (code points) may rewrite, written to
    ``out`` in order; returns how many. Candidates: the first 64 original lines (code
    points ``codes[starts[p]:][:lens[p]]``) at indentation ``width`` whose first word starts
    with the key's first ``head`` code points (its first word cut to 12 characters: under
    12, the whole word, so whitespace, one of ``spaces``, or the line's end follows it).
    Kept: those whose difflib real_quick_ratio and quick_ratio with the key are at least 0.7,
    the same float arithmetic as difflib (2.0 * matches / length); matches, the size of the
    two multisets' intersection, by merging the sorted code points."""
    lb = key.shape[0]
    b = np.sort(key)
    k = 0
    taken = 0
    for p in range(lens.shape[0]):
        if taken >= 64:
            break
        la = lens[p]
        if ow[p] != width or la < head:
            continue
        s = starts[p]
        same = True
        for t in range(head):
            if codes[s + t] != key[t]:
                same = False
                break
        if not same:
            continue
        if head < 12 and la > head:
            c = codes[s + head]
            space = False
            for w in spaces:
                if c == w:
                    space = True
                    break
            if not space:
                continue
        taken += 1
        length = la + lb
        if 2.0 * min(la, lb) / length < 0.7:
            continue
        a = np.sort(codes[s:s + la])
        matches = 0
        x = 0
        y = 0
        while x < la and y < lb:
            if a[x] == b[y]:
                matches += 1
                x += 1
                y += 1
            elif a[x] < b[y]:
                x += 1
            else:
                y += 1
        if 2.0 * matches / length >= 0.7:
            out[k] = p
            k += 1
    return k


@njit(cache=True, nogil=True)
def prepare(oid: np.ndarray, ow: np.ndarray, lens: np.ndarray, n_ids: int, delete: int,
            delete_blank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                        np.ndarray]:
    """The original's tables: ``by`` (positions grouped by key id, ascending within each,
    as a stable argsort of ``oid``) and ``at`` (each id's slice of it), ``by_w`` (their
    widths), ``D`` (D[p]: deleting lines 0..p-1) and ``fnb`` (each position's next
    non-blank line's width, itself when non-blank; -1 past the last)."""
    n = oid.shape[0]
    at = np.zeros(n_ids + 1, dtype=np.int64)
    for p in range(n):
        at[oid[p] + 1] += 1
    for i in range(n_ids):
        at[i + 1] += at[i]
    fill = at[:-1].copy()
    by = np.empty(n, dtype=np.int64)
    by_w = np.empty(n, dtype=np.int64)
    for p in range(n):
        i = oid[p]
        by[fill[i]] = p
        by_w[fill[i]] = ow[p]
        fill[i] += 1
    D = np.empty(n + 1, dtype=np.int64)
    D[0] = 0
    for p in range(n):
        D[p + 1] = D[p] + (delete_blank if lens[p] == 0 else delete)
    fnb = np.empty(n + 1, dtype=np.int64)
    width = -1
    fnb[n] = -1
    for p in range(n - 1, -1, -1):
        if lens[p] != 0:
            width = ow[p]
        fnb[p] = width
    return by, by_w, at, D, fnb
