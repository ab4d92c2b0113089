"""The quality gate: a candidate version ships only if, replayed on held-out edits, its
reward per request does not fall below the deployed version's by more than a margin.

Both versions see the same states (one shared observation cache: the LM is frozen) and
draw their actions with the same seed, so the comparison is paired.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

__all__ = ["GateResult", "Gate"]


@dataclass
class GateResult:
    passed: bool
    candidate: int
    deployed: int
    reward_candidate: float
    reward_deployed: float
    margin: float
    requests: int
    seconds: float
    reason: str


class Gate:
    def __init__(self, pairs: Sequence[Any], lm: Any, *, margin: float = 0.005,
                 seed: int = 0, use_lm: bool = True) -> None:
        from specialists.tab.features import ObserveConfig
        from specialists.tab.harness import ObservationCache

        self.pairs = list(pairs)
        self.margin = margin
        self.seed = seed
        self.cache = ObservationCache(lm, ObserveConfig(use_lm=use_lm and lm is not None))

    def reward(self, policy_dir: str | Path) -> tuple[float, int]:
        from specialists.tab.harness import run
        from specialists.tab.policy import TabPolicy

        policy = TabPolicy.load(policy_dir)
        _reseed(policy, self.seed)  # both versions draw from the same random stream

        def decide(req: Any, obs: Any) -> Any:
            return policy.act(obs, sample=True).suggestion

        metrics = run(self.pairs, decide, self.cache)
        return metrics.reward / max(1, metrics.requests), metrics.requests

    def check(self, candidate_dir: str | Path, candidate: int, deployed_dir: str | Path,
              deployed: int) -> GateResult:
        t0 = time.monotonic()
        old, n = self.reward(deployed_dir)
        new, _ = self.reward(candidate_dir)
        passed = new >= old - self.margin
        reason = (f"reward per request {new:+.4f} vs deployed {old:+.4f} "
                  f"(margin {self.margin}): " + ("ships" if passed else "held back"))
        return GateResult(passed, candidate, deployed, new, old, self.margin, n,
                          time.monotonic() - t0, reason)


def _reseed(policy: Any, seed: int) -> None:
    import torch

    policy._gen = torch.Generator().manual_seed(seed)
