"""The baselines the RL policy is measured against, all in the same harness (issue 5).

(a) ``always``: always show the supervised model's suggestion — the LM's greedy
    continuation to the end of the line;
(b) ``copilot_filter``: (a) gated by GitHub Copilot's contextual filter, a logistic
    regression on its hand features fitted on (a)'s logged outcomes, shown at p >= 0.15;
(c) ``confidence``: (a) shown when the LM's own mean token log-probability clears a
    threshold tuned on the dev split;
(d) ``copy``: context copy alone, shown when the match is at least ``m`` characters, ``m``
    tuned on dev;
(e) ``truncate``: the LM's greedy line cut at the first token whose log-probability falls
    below a threshold tuned on dev.

``always_ensemble`` (reported besides, not a target) always shows the ensemble's default:
the longest context-copy match to the end of its line, else the LM's line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from specialists.tab.context_copy import Candidate
from specialists.tab.features import COPILOT_FEATURES, Observation, copilot_features, line_cut
from specialists.tab.types import Suggestion, TabRequest

__all__ = ["always", "always_ensemble", "lm_candidate", "copy_min_match", "confidence", "truncate", "CopilotFilter", "tune",
           "default_candidate", "mean_logprob"]

COPY_SOURCES = ("file", "edit", "open_file")


def _completion(obs: Observation, c: Candidate, cut: int) -> Suggestion | None:
    text = c.text[:cut]
    return Suggestion(obs.cursor, obs.cursor, text) if text.strip() else None


def lm_candidate(obs: Observation) -> tuple[Candidate, int] | None:
    """The supervised model's suggestion: the LM's greedy line."""
    for c in obs.candidates:
        if c.source == "lm":
            return c, len(c.text)
    return None


def default_candidate(obs: Observation) -> tuple[Candidate, int] | None:
    """The ensemble's default: the longest copy match to its line end, else the LM's line."""
    for c in obs.candidates:
        if c.source in COPY_SOURCES:
            return c, line_cut(c.text)
    return lm_candidate(obs)


def always(req: TabRequest, obs: Observation) -> Suggestion | None:
    pick = lm_candidate(obs)
    return _completion(obs, *pick) if pick else None


def always_ensemble(req: TabRequest, obs: Observation) -> Suggestion | None:
    pick = default_candidate(obs)
    return _completion(obs, *pick) if pick else None


def mean_logprob(c: Candidate, cut: int) -> float:
    lps = [lp for lp, end in zip(c.token_logprobs, c.token_ends) if end <= cut] or c.token_logprobs[:1]
    return sum(lps) / len(lps) if lps else -math.inf


def confidence(threshold: float) -> Callable[[TabRequest, Observation], Suggestion | None]:
    def decide(req: TabRequest, obs: Observation) -> Suggestion | None:
        pick = lm_candidate(obs)
        if pick is None or mean_logprob(*pick) < threshold:
            return None
        return _completion(obs, *pick)
    return decide


def copy_min_match(m: int) -> Callable[[TabRequest, Observation], Suggestion | None]:
    def decide(req: TabRequest, obs: Observation) -> Suggestion | None:
        for c in obs.candidates:
            if c.source in COPY_SOURCES:
                return _completion(obs, c, line_cut(c.text)) if c.match_len >= m else None
        return None
    return decide


def truncate(threshold: float) -> Callable[[TabRequest, Observation], Suggestion | None]:
    def decide(req: TabRequest, obs: Observation) -> Suggestion | None:
        for c in obs.candidates:
            if c.source == "lm":
                cut = 0
                for lp, end in zip(c.token_logprobs, c.token_ends):
                    if lp < threshold:
                        break
                    cut = end
                return _completion(obs, c, cut)
        return None
    return decide


@dataclass
class CopilotFilter:
    """Logistic regression on Copilot's hand features; suppresses below ``threshold``.

    ``weights``/``bias`` default to nothing (fit them with :meth:`fit` on logged outcomes).
    """

    weights: list[float] = field(default_factory=list)
    bias: float = 0.0
    threshold: float = 0.15

    def probability(self, req: TabRequest) -> float:
        x = copilot_features(req)
        z = self.bias + sum(w * v for w, v in zip(self.weights, x))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def __call__(self, req: TabRequest, obs: Observation) -> Suggestion | None:
        sug = always(req, obs)
        if sug is None or self.probability(req) < self.threshold:
            return None
        return sug

    @classmethod
    def fit(cls, X: Sequence[Sequence[float]], y: Sequence[int], l2: float = 1.0,
            iters: int = 50, threshold: float = 0.15) -> "CopilotFilter":
        """Newton's method (IRLS) with an L2 penalty on the weights, not the bias."""
        import numpy as np

        Xa = np.asarray(X, dtype=np.float64)
        ya = np.asarray(y, dtype=np.float64)
        n, d = Xa.shape
        Z = np.hstack([np.ones((n, 1)), Xa])
        w = np.zeros(d + 1)
        reg = np.eye(d + 1) * l2
        reg[0, 0] = 0.0
        for _ in range(iters):
            p = 1.0 / (1.0 + np.exp(-np.clip(Z @ w, -30, 30)))
            grad = Z.T @ (p - ya) + reg @ w
            hess = (Z * (p * (1 - p))[:, None]).T @ Z + reg + 1e-6 * np.eye(d + 1)
            step = np.linalg.solve(hess, grad)
            w -= step
            if np.abs(step).max() < 1e-8:
                break
        return cls(weights=[float(v) for v in w[1:]], bias=float(w[0]), threshold=threshold)

    def named_weights(self) -> dict[str, float]:
        return dict(zip(COPILOT_FEATURES, self.weights))


def tune(grid: Sequence[Any], make: Callable[[Any], Any], score: Callable[[Any], float]) -> tuple[Any, float]:
    """The grid value whose decider scores best (reward per request on dev)."""
    best, best_score = None, -math.inf
    for value in grid:
        s = score(make(value))
        if s > best_score:
            best, best_score = value, s
    return best, best_score
