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

Both report the paired difference (candidate − deployed, reward per request) with its
confidence interval (issue 15: a gate that can see): paired by edit for ``Gate``, by event
for ``LoggedGate``, the standard error from the delta method for a ratio of sums. A
candidate ships only when the interval's low end is above ``-margin``: the data must show
that it is not worse by more than the margin, not merely fail to show that it is.

``judge_canary`` applies the same rule to a canary (issue 15): live traffic split between
the candidate and the deployed version over the same window. The two arms hold different
requests, so the comparison is unpaired (:func:`two_sample_difference`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

__all__ = ["GateResult", "Gate", "LoggedGate", "judge_canary", "paired_difference", "paired_se",
           "two_sample_difference", "verdict"]

_Z = {0.9: 1.6449, 0.95: 1.96, 0.99: 2.5758}


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
    difference: float = 0.0
    """Candidate − deployed, reward per request."""
    ci_low: float = 0.0
    ci_high: float = 0.0
    units: int = 0
    """Paired units behind the interval: edits (``Gate``) or events (``LoggedGate``)."""

    def summary(self) -> dict[str, Any]:
        """The decision's figures, for the deploy log (JSON: an unbounded end is None)."""
        import math

        def r4(x: float) -> float | None:
            return round(x, 4) if math.isfinite(x) else None

        return {"passed": self.passed, "difference": r4(self.difference),
                "ci": [r4(self.ci_low), r4(self.ci_high)], "units": self.units,
                "requests": self.requests, "margin": self.margin}


def paired_se(new: Sequence[tuple[float, float]], old: Sequence[tuple[float, float]]
              ) -> tuple[float, float, float, float]:
    """Reward per request of ``new`` minus ``old`` from paired units, each a (reward sum,
    requests) for both, with its standard error: (difference, se, new, old); the se is
    infinite for a single unit.

    Each rate is a ratio of sums, so its standard error comes from the delta method: unit i
    contributes (R_i − r·n_i) / n̄; the pairing subtracts the two contributions unit by
    unit, so what both versions share (an edit's difficulty) cancels, and the many requests
    of one unit are not counted as independent draws. A version with no requests on any
    unit (all (0, 0)) reads as 0 with no error: ``new``'s own clustered se."""
    import math

    if len(new) != len(old) or not new:
        raise ValueError("paired units: the same non-empty list of units for both versions")
    k = len(new)
    n_new, n_old = sum(n for _, n in new), sum(n for _, n in old)
    r_new = sum(r for r, _ in new) / max(n_new, 1e-12)
    r_old = sum(r for r, _ in old) / max(n_old, 1e-12)
    mean_new, mean_old = max(n_new, 1e-12) / k, max(n_old, 1e-12) / k
    u = [(rn - r_new * nn) / mean_new - (ro - r_old * no) / mean_old
         for (rn, nn), (ro, no) in zip(new, old)]
    se = math.sqrt(sum(x * x for x in u) / (k * (k - 1))) if k > 1 else float("inf")
    return r_new - r_old, se, r_new, r_old


def paired_difference(new: Sequence[tuple[float, float]], old: Sequence[tuple[float, float]],
                      confidence: float = 0.95) -> tuple[float, float, float, float, float]:
    """:func:`paired_se` as a confidence interval: (difference, low, high, new, old)."""
    if len(new) != len(old) or not new:
        raise ValueError("paired units: the same non-empty list of units for both versions")
    z = _Z.get(confidence)
    if z is None:
        raise ValueError(f"confidence must be one of {sorted(_Z)}")
    diff, se, r_new, r_old = paired_se(new, old)
    return diff, diff - z * se, diff + z * se, r_new, r_old


def _rate_variance(units: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(reward per request, its variance) of units (reward sum, requests), by the delta
    method for a ratio of sums: unit i contributes (R_i − r·n_i) / n̄."""
    k = len(units)
    n = max(sum(u for _, u in units), 1e-12)
    rate = sum(r for r, _ in units) / n
    mean = n / k
    ss = sum(((r - rate * u) / mean) ** 2 for r, u in units)
    return rate, ss / (k * (k - 1)) if k > 1 else float("inf")


def two_sample_difference(new: Sequence[tuple[float, float]], old: Sequence[tuple[float, float]],
                          confidence: float = 0.95) -> tuple[float, float, float, float, float]:
    """Reward per request of ``new`` minus ``old`` from two independent samples of units,
    each a (reward sum, requests), with its confidence interval: (difference, low, high,
    new, old). Each rate's variance comes from the delta method (:func:`_rate_variance`);
    independent samples add their variances (Welch). Units of one request each make it
    the plain difference of means."""
    import math

    if not new or not old:
        raise ValueError("two samples: a non-empty list of units for each version")
    z = _Z.get(confidence)
    if z is None:
        raise ValueError(f"confidence must be one of {sorted(_Z)}")
    r_new, var_new = _rate_variance(new)
    r_old, var_old = _rate_variance(old)
    se = math.sqrt(var_new + var_old)
    diff = r_new - r_old
    return diff, diff - z * se, diff + z * se, r_new, r_old


def judge_canary(candidate_events: Sequence[Any], deployed_events: Sequence[Any],
                 candidate: int, deployed: int, *, margin: float = 0.005,
                 min_events: int = 1, reward: Any = None) -> GateResult:
    """Promote (``passed``) or roll back a canary on the live reward of each arm's labelled
    events over the same window: one unit per request. The canary is rolled back when it is
    shown worse — the 95% interval of (canary − deployed) ends below ``-margin`` — and
    promoted otherwise: the gate before it already found it no worse on held-out events,
    and asking the canary to show that again (the interval's low end above ``-margin``)
    would hold back an equal candidate until tens of thousands of events (per-request
    reward has an SD near 0.4). Requests of one editor share its arm and may be alike,
    which per-request units do not see (the events carry no session); the interval is then
    somewhat too narrow."""
    from specialists.tab.loop.trainer import reward_of
    from specialists.tab.replay import RewardConfig

    t0 = time.monotonic()
    reward = reward or RewardConfig()
    n_new, n_old = len(candidate_events), len(deployed_events)
    if min(n_new, n_old) < max(min_events, 2):
        return GateResult(False, candidate, deployed, 0.0, 0.0, margin, n_new + n_old,
                          time.monotonic() - t0,
                          f"only {n_new} canary and {n_old} deployed events (need "
                          f"{max(min_events, 2)} each): rolled back")
    diff, low, high, new, old = two_sample_difference(
        [(reward_of(e, reward), 1.0) for e in candidate_events],
        [(reward_of(e, reward), 1.0) for e in deployed_events])
    passed = high >= -margin
    reason = (f"live reward per request {new:+.4f} vs deployed {old:+.4f}: difference "
              f"{diff:+.4f} (95% CI {low:+.4f} to {high:+.4f}, {n_new} canary vs {n_old} "
              f"deployed requests, unpaired); rolled back when the high end is below "
              f"{-margin:+.4f}: " + ("promoted" if passed else "rolled back"))
    return GateResult(passed, candidate, deployed, new, old, margin, n_new + n_old,
                      time.monotonic() - t0, reason, diff, low, high, n_new)


def verdict(diff: float, low: float, high: float, margin: float, units: str) -> tuple[bool, str]:
    """The gates' rule on a paired difference and its 95% interval: ship when the interval's
    low end is at least ``-margin``; (passed, the reason in words)."""
    passed = low >= -margin
    return passed, (f"difference {diff:+.4f} (95% CI {low:+.4f} to {high:+.4f}, {units}); "
                    f"ships when the low end is at least {-margin:+.4f}: "
                    + ("ships" if passed else "held back"))


class Gate:
    """The gate on replayed held-out edits, paired by edit. ``greedy`` (the default) judges
    each version by its most likely actions, so the two differ only where the policies do;
    ``greedy=False`` samples both from one seeded stream instead.

    ``population`` (a :class:`~specialists.tab.users.Population`, issue 35): the edits are
    typed by its people — edit ``j`` by person ``j``, drawn afresh with the same seed for
    each version, so both meet the same people — instead of the oracle. ``reward``: what a
    request scores (a :class:`~specialists.tab.users.KeptReward` scores what was kept;
    default the accept key's ``RewardConfig``)."""

    def __init__(self, pairs: Sequence[Any], lm: Any, *, margin: float = 0.005,
                 seed: int = 0, use_lm: bool = True, greedy: bool = True,
                 confidence: float = 0.95, population: Any = None, reward: Any = None,
                 ask_after_edit: bool = False) -> None:
        from specialists.tab.features import ObserveConfig
        from specialists.tab.harness import ObservationCache

        self.pairs = list(pairs)
        self.margin = margin
        self.seed = seed
        self.greedy = greedy
        self.confidence = confidence
        self.population = population
        self.reward = reward
        self.ask_after_edit = ask_after_edit
        """Replay a request also when each hunk is done, as the live editors (and the HTTP
        simulator) ask."""
        self.cache = ObservationCache(lm, ObserveConfig(use_lm=use_lm and lm is not None))

    def per_edit(self, policy_dir: str | Path) -> list[tuple[float, int]]:
        """(reward sum, requests) of each gate edit replayed with this version."""
        from specialists.tab.harness import run
        from specialists.tab.policy import TabPolicy

        policy = TabPolicy.load(policy_dir)
        _reseed(policy, self.seed)  # both versions draw from the same random stream

        def decide(req: Any, obs: Any) -> Any:
            return policy.act(obs, sample=not self.greedy).suggestion

        from specialists.tab.users import KeptReward, World

        world = World(self.population, seed=self.seed, people=len(self.pairs)) \
            if self.population is not None else None
        kept = self.reward if isinstance(self.reward, KeptReward) else None
        session_reward = None if kept is not None else self.reward
        out = []
        for j, pair in enumerate(self.pairs):
            m = run([pair], decide, self.cache, reward=session_reward,
                    ask_after_edit=self.ask_after_edit,
                    world=_Person(world, j) if world is not None else None, kept=kept)
            out.append((m.reward_kept if kept is not None else m.reward, m.requests))
        return out

    def check(self, candidate_dir: str | Path, candidate: int, deployed_dir: str | Path,
              deployed: int) -> GateResult:
        t0 = time.monotonic()
        old_edits = self.per_edit(deployed_dir)
        new_edits = self.per_edit(candidate_dir)
        diff, low, high, new, old = paired_difference(new_edits, old_edits, self.confidence)
        n = sum(k for _, k in old_edits)
        passed, said = verdict(diff, low, high, self.margin,
                               f"{len(self.pairs)} paired edits, {n} requests")
        who = f" ({self.population.name} people)" if self.population is not None else ""
        reason = f"reward per request{who} {new:+.4f} vs deployed {old:+.4f}: " + said
        return GateResult(passed, candidate, deployed, new, old, self.margin, n,
                          time.monotonic() - t0, reason, diff, low, high, len(self.pairs))


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
        ess = sum(weights) ** 2 / max(sum(w * w for w in weights), 1e-12)
        # SNIPS is the ratio Σ w·r / Σ w and the deployed version's reward Σ r / n: paired
        # by event, each a ratio of sums (w counts as the candidate's "requests")
        if sum(weights) > 0:
            diff, low, high, new, old = paired_difference(
                [(w * r, w) for w, r in zip(weights, rewards)], [(r, 1.0) for r in rewards])
        else:
            diff, low, high, new, old = 0.0, -math.inf, math.inf, 0.0, sum(rewards) / len(rewards)
        passed, said = verdict(diff, low, high, self.margin,
                               f"{len(held)} held-out events, effective {ess:.0f}")
        reason = f"off-policy reward per request {new:+.4f} vs deployed {old:+.4f}: " + said
        return GateResult(passed, candidate, deployed, new, old, self.margin, len(held),
                          time.monotonic() - t0, reason, diff, low, high, len(held))


class _Person:
    """A world seen from one edit: ``run`` asks for person 0 of its one pair; this is the
    world's person ``j``."""

    def __init__(self, world: Any, j: int) -> None:
        self.world, self.j = world, j

    def person(self, _i: int) -> Any:
        return self.world.person(self.j)


def _reseed(policy: Any, seed: int) -> None:
    import torch

    policy._gen = torch.Generator().manual_seed(seed)
