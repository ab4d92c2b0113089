"""``gap_search.best_chain``'s recurrence, compiled (numba): one call per gap.

The numpy version scored each sketch line's nodes against all earlier nodes with a dozen
numpy calls per line; here the same float64 operations run in the same order (no fast-math:
every value, every ``_EPS`` comparison and so every tie is as before).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["best_chain"]


@njit(cache=True, nogil=True)
def _pick(best: np.ndarray, count: int, cost: np.ndarray, kind: np.ndarray, diag: float,
          start: float, prefer_right: bool, eps: float) -> tuple[float, int, bool]:
    """``gap_search._pick`` for one row whose values are ``best[a] - cost[a]`` for a <
    count, plus ``diag`` where ``kind[a]`` is 1 (the diagonal), -inf where it is 2 (not
    before): the best value (or ``start``), its index (-1: start) and whether two of them
    tie within ``eps``."""
    top = -np.inf
    for a in range(count):
        v = best[a] - cost[a]
        if kind[a] == 1:
            v = v + diag
        elif kind[a] == 2:
            v = -np.inf
        cost[a] = v  # (the row's values, for the second pass)
        if v > top:
            top = v
    top = max(top, start)
    thr = top - eps
    start_close = start > thr
    n_close = 1 if start_close else 0
    first = -1
    last = -1
    for a in range(count):
        if cost[a] > thr:
            n_close += 1
            if first < 0:
                first = a
            last = a
    if prefer_right:
        arg = last
    else:
        arg = -1 if start_close else (first if first >= 0 else 0)
    score = cost[arg] if arg >= 0 else start
    return score, arg, n_close > 1


@njit(cache=True, nogil=True)
def best_chain(table: np.ndarray, seps: np.ndarray, dc: np.ndarray, ja: int, pa: int, jb: int,
               pb: int, diag: float, prefer_right: bool, eps: float,
               back: np.ndarray) -> tuple[int, bool]:
    """Nodes ``table`` (sketch line, original line, weight; sorted by sketch line): fills
    ``back`` (each node's predecessor, -1: none) and returns the chain's last node (-1:
    the empty chain) and whether any tie was met."""
    count = table.shape[0]
    js = np.empty(count, dtype=np.int64)
    ps = np.empty(count, dtype=np.int64)
    for i in range(count):
        js[i] = np.int64(table[i, 0])
        ps[i] = np.int64(table[i, 1])
    best = np.empty(count)
    cost = np.empty(count)
    kind = np.empty(count, dtype=np.int8)
    tied = False
    s = 0
    while s < count:
        jb_ = js[s]
        e = s
        while e < count and js[e] == jb_:
            e += 1
        opens = seps[jb_] - seps[ja + 1] > 0
        for r in range(s, e):
            pb_ = ps[r]
            start = 0.0 if opens else -(dc[pb_] - dc[pa + 1])
            if s == 0:
                best[r] = start + table[r, 2]
                back[r] = -1
                continue
            for a in range(s):
                sep = seps[jb_] - seps[js[a] + 1] > 0
                cost[a] = 0.0 if sep else dc[pb_] - dc[ps[a] + 1]
                if ps[a] >= pb_:
                    kind[a] = 2
                elif not sep and js[a] == jb_ - 1 and ps[a] == pb_ - 1:
                    kind[a] = 1
                else:
                    kind[a] = 0
            score, arg, row_tied = _pick(best, s, cost, kind, diag, start, prefer_right, eps)
            tied = tied or row_tied
            best[r] = score + table[r, 2]
            back[r] = arg
        s = e
    empty = 0.0 if seps[jb] - seps[ja + 1] > 0 else -(dc[pb] - dc[pa + 1])
    for a in range(count):
        cost[a] = 0.0 if seps[jb] - seps[js[a] + 1] > 0 else dc[pb] - dc[ps[a] + 1]
        kind[a] = 0
    _, end, end_tied = _pick(best, count, cost, kind, 0.0, empty, prefer_right, eps)
    return end, tied or end_tied
