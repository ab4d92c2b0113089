"""The quality gates: a candidate version ships only if its reward per request does not
fall below the deployed version's by more than a margin.

``Gate`` replays held-out edits (the simulated loop, which has edit histories): both versions
see the same states (one shared observation cache: the LM is frozen) and draw their actions
with the same seed, so the comparison is paired.

``LoggedGate`` judges on what a live server logged (the live loop, which has only its
users): the deployed version's held-out events, each with the action it took, that action's
log-probability and the user's answer. The candidate's reward there is estimated off-policy
by self-normalised importance sampling (SNIPS): each event's reward weighted by
π_candidate(action | state) / π_deployed(action | state).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

__all__ = ["GateResult", "Gate", "LoggedGate"]


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


class LoggedGate:
    """The gate on logged events (see the module docstring)."""

    def __init__(self, *, margin: float = 0.005, max_weight: float = 20.0,
                 min_events: int = 20) -> None:
        self.margin = margin
        self.max_weight = max_weight
        """Importance weights are clipped here: one rare action must not decide alone."""
        self.min_events = min_events

    def check(self, candidate_dir: str | Path, candidate: int, deployed: int,
              held: Sequence[Any], reward: Any = None) -> GateResult:
        import math

        from specialists.tab.features import from_features
        from specialists.tab.loop.trainer import reward_of
        from specialists.tab.policy import TabPolicy
        from specialists.tab.replay import RewardConfig

        t0 = time.monotonic()
        reward = reward or RewardConfig()
        if len(held) < self.min_events:
            return GateResult(False, candidate, deployed, 0.0, 0.0, self.margin, len(held),
                              time.monotonic() - t0,
                              f"only {len(held)} held-out events (need {self.min_events}): "
                              "held back")
        policy = TabPolicy.load(candidate_dir)
        n_feat = policy.config.n_action
        observations = [from_features(e.features, n_feat) for e in held]
        new_logp = policy.logprobs(observations, [int(e.action) for e in held])
        rewards = [reward_of(e, reward) for e in held]
        weights = [min(self.max_weight, math.exp(new - float(e.logprob)))
                   for new, e in zip(new_logp, held)]
        old = sum(rewards) / len(rewards)
        new = sum(w * r for w, r in zip(weights, rewards)) / max(sum(weights), 1e-12)
        ess = sum(weights) ** 2 / max(sum(w * w for w in weights), 1e-12)
        passed = new >= old - self.margin
        reason = (f"off-policy reward per request {new:+.4f} vs deployed {old:+.4f} on "
                  f"{len(held)} held-out events (effective {ess:.0f}; margin {self.margin}): "
                  + ("ships" if passed else "held back"))
        return GateResult(passed, candidate, deployed, new, old, self.margin, len(held),
                          time.monotonic() - t0, reason)


def _reseed(policy: Any, seed: int) -> None:
    import torch

    policy._gen = torch.Generator().manual_seed(seed)
