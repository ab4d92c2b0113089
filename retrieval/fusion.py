"""Fuse a lexical and a dense ranking into one.

``rrf``: reciprocal-rank fusion, score = sum_r w_r / (k + rank_r) (Cormack et al., 2009),
optionally weighted. ``linear``: each retriever's exact scores over the union of both
candidate lists, min-max normalised over that union, mixed as
``w * dense + (1 - w) * lexical``. Rank fusion throws the score gaps away; on the
standard-library benchmark plain RRF did not beat the dense retriever alone
(CALIBRATION.md), the linear mix with ``w`` tuned on a separate corpus does (BENCHMARKS.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["linear_fusion", "rrf_fusion"]


def rrf_fusion(lexical_ids: "np.ndarray", dense_ids: "np.ndarray", k: int = 60,
               dense_weight: float = 0.5) -> dict[int, float]:
    """Weighted RRF over two ranked id lists (best first); weights sum to 2 as in plain RRF."""
    fused: dict[int, float] = {}
    for weight, ids in ((2 * (1 - dense_weight), lexical_ids), (2 * dense_weight, dense_ids)):
        for rank, i in enumerate(ids.tolist()):
            fused[i] = fused.get(i, 0.0) + weight / (k + rank + 1)
    return fused


def linear_fusion(candidates: "np.ndarray", lexical: "np.ndarray", dense: "np.ndarray",
                  dense_weight: float) -> "np.ndarray":
    """Scores for ``candidates`` from both retrievers' exact scores on those candidates."""
    def norm(x: "np.ndarray") -> "np.ndarray":
        lo, hi = float(x.min()), float(x.max())
        return (x - lo) / (hi - lo) if hi > lo else x * 0.0

    if len(candidates) == 0:
        return lexical[:0]
    return dense_weight * norm(dense) + (1.0 - dense_weight) * norm(lexical)
