"""One learned score over the reading search's candidates, and the calibrated abstain.

A logistic regression (``train_scorer`` fits it on the development projects, both
development generators) gives each candidate file of ``search`` its probability of being the
file the sketch means (up to whitespace). The best candidate is answered when that
probability reaches the threshold — one for the rules' own answer
(``ApplyOptions.scorer_rules_threshold``), one for a reading the search found where the rules
abstained (``ApplyOptions.scorer_threshold``); by default the two shipped with the weights,
chosen together on development sketches (``train_scorer``: the most exact answers with each
development generator's silent-wrong rate under 0.5%, or, where no pair reaches that, no
higher than the rules' own) — otherwise the applier abstains.

The weights ship as ``scorer_weights.json`` beside this module: the feature names (they must
be ``search.FEATURES``, in order), the coefficients, the threshold, and how they were made.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from specialists.apply.search import FEATURES, Candidate, Search, features

__all__ = ["WEIGHTS_PATH", "Scorer", "choose", "default_scorer"]

WEIGHTS_PATH = Path(__file__).with_name("scorer_weights.json")


@dataclass(frozen=True)
class Scorer:
    """Coefficients over ``search.FEATURES``, and the default threshold."""

    coef: tuple[float, ...]
    threshold: float  # for a searched reading (the rules abstained)
    meta: dict[str, Any]
    rules_threshold: float = 0.0  # for the rules' own answer

    @classmethod
    def load(cls, path: Path | str = WEIGHTS_PATH) -> "Scorer":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no scorer weights at {path}: make them with "
                f"`python -m specialists.apply.train_scorer --out {path}`") from None
        names = tuple(data.get("features", ()))
        if names != FEATURES:
            raise ValueError(f"the scorer weights at {path} were made for other features "
                             f"({len(names)} against {len(FEATURES)}): retrain them with "
                             f"`python -m specialists.apply.train_scorer --out {path}`")
        return cls(tuple(float(c) for c in data["coef"]), float(data["threshold"]),
                   {k: v for k, v in data.items() if k not in ("coef", "features")},
                   float(data.get("rules_threshold", 0.0)))

    def probability(self, row: list[float]) -> float:
        z = sum(c * x for c, x in zip(self.coef, row))
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


@lru_cache(maxsize=1)
def default_scorer() -> Scorer:
    return Scorer.load()


def choose(found: Search, scorer: Scorer) -> tuple[Candidate | None, float]:
    """Score every candidate (``features`` then the model); the best one and its probability,
    or ``(None, 0.0)`` when the search found none. Ties go to the rules' answer, then to the
    candidate more readings give."""
    n_readings = sum(len(c.readings) for c in found.candidates)
    best: Candidate | None = None
    best_key: tuple[float, bool, int] | None = None
    for cand in found.candidates:
        cand.features = features(cand, found, n_readings)
        cand.score = scorer.probability(cand.features)
        key = (cand.score, cand.rules, len(cand.readings))
        if best_key is None or key > best_key:
            best, best_key = cand, key
    return best, (best.score if best is not None else 0.0)
