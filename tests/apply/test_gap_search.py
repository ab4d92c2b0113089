"""The piecewise reading's search pieces, against slow references: the gap DP (``best_chain``)
against enumerating every chain, and the similar-line search against a plain LCS and
difflib."""

from __future__ import annotations

import difflib
import itertools
import random

import pytest

from specialists.apply import gap_search
from specialists.apply.gap_search import best_chain
from specialists.apply.merger import Merger
from specialists.apply.result import ApplyOptions
from specialists.apply.similarity import similarities
from specialists.apply.sketch_lines import SketchLines
from specialists.apply.text import split_lines

ORIGINAL = "".join(f"line {i}\n" if i % 3 else "\n" for i in range(14))
SKETCH = "# ...\na\nb\n\nc\n# ... existing code ...\nd\ne\n\nf\n# ...\n"


def _score(merger: Merger, chain: list[tuple[int, int, float]], ja: int, pa: int, jb: int,
           pb: int) -> float:
    """A chain's score written out: its weights, minus what it deletes between consecutive
    anchors not separated by a marker, plus the diagonal bonus."""
    sk, dcost = merger.sk, merger.dcost
    anchors = [(ja, pa, 0.0)] + chain + [(jb, pb, 0.0)]
    total = sum(w for _, _, w in chain)
    for (j0, p0, _), (j1, p1, _) in zip(anchors, anchors[1:]):
        if sk.sep_between(j0, j1):
            continue
        total -= dcost[p1] - dcost[p0 + 1]
        if (j0, p0) != (ja, pa) and (j1, p1) != (jb, pb) and p1 == p0 + 1 and j1 == j0 + 1:
            total += merger.wt.diag
    return total


@pytest.mark.parametrize("small", [0, 1000], ids=["matrix", "loop"])
@pytest.mark.parametrize("seed", range(40))
def test_gap_chain_is_the_best_chain(seed: int, small: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gap_search, "_SMALL_CHAIN", small)  # both implementations
    rng = random.Random(seed)
    olines = split_lines(ORIGINAL)
    merger = Merger(olines, SketchLines(split_lines(SKETCH), set(olines.keys)), "python",
                    ApplyOptions())
    m, n = len(merger.sk.keys), len(olines.keys)
    cells = sorted(rng.sample([(j, p) for j in range(m) for p in range(n)], rng.randint(1, 9)))
    nodes = [(j, p, rng.choice((10.0, 3.0, 0.5, 0.1, 9.7))) for j, p in cells]
    ja, pa, jb, pb = -1, -1, m, n
    best = max(
        _score(merger, list(chain), ja, pa, jb, pb)
        for size in range(len(nodes) + 1)
        for chain in itertools.combinations(nodes, size)
        if all(a[0] < b[0] and a[1] < b[1] for a, b in zip(chain, chain[1:]))
    )
    optimal = [
        chain for size in range(len(nodes) + 1)
        for chain in itertools.combinations(nodes, size)
        if all(a[0] < b[0] and a[1] < b[1] for a, b in zip(chain, chain[1:]))
        and _score(merger, list(chain), ja, pa, jb, pb) > best - 1e-6
    ]
    weight = {(j, p): w for j, p, w in nodes}
    for prefer_right in (False, True):
        chain, tied = best_chain(merger, nodes, ja, pa, jb, pb, prefer_right)
        scored = [(j, p, weight[j, p]) for j, p in chain]
        assert _score(merger, scored, ja, pa, jb, pb) == pytest.approx(best, abs=1e-9)
        if len(optimal) > 1:
            assert tied  # two best chains: the caller must compare their files


def _lcs(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for ch in a:
        prev = 0
        for i, other in enumerate(b):
            prev, row[i + 1] = row[i + 1], prev + 1 if ch == other else max(row[i + 1], row[i])
    return row[-1]


@pytest.mark.parametrize("seed", range(20))
def test_similar_lines_are_found_by_lcs_ratio_and_by_difflib_when_exact(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "abcde (),=_x"
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(60)]
    key = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
    for threshold in (0.4, 0.6, 0.8):
        found = dict((p, score) for score, p in similarities(key, lines, 5, 55, threshold))
        exact = dict((p, score) for score, p in similarities(key, lines, 5, 55, threshold, exact=True))
        for p in range(5, 55):
            if not lines[p]:
                assert p not in found and p not in exact
                continue
            lcs = 2 * _lcs(key, lines[p]) / (len(key) + len(lines[p]))
            assert (p in found) == (lcs >= threshold - 1e-6)
            if p in found:
                assert found[p] == pytest.approx(lcs)
            ratio = difflib.SequenceMatcher(None, lines[p], key, autojunk=False).ratio()
            assert (p in exact) == (ratio >= threshold)
            if p in exact:
                assert exact[p] == pytest.approx(ratio)
