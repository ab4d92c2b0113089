"""Turn the deployed version's labelled events into the next policy version.

The update is :meth:`TabPolicy.ppo_update` (PPO-clip, several epochs, KL guard, learned
value baseline), continuing the Adam state and advantage scale the parent version saved.
By default only on-policy events are used: those drawn by the deployed version. Events of
any other version are counted and refused, never silently mixed in (DESIGN.md, the online
loop). ``PPOConfig.max_staleness = k`` admits the events of the deployed version's last
``k`` ancestors too (by lineage), each importance-weighted towards the current policy from
its logged log-probability and clipped at ``PPOConfig.is_clip``; older ones are refused and
counted the same way.

``q_model=True`` adds a regression of reward on the same features (ridge, as the
contextual bandit's) as the update's control variate (``ppo_update(q_values=...)``): fitted
on the labelled events of the deployed version's whole lineage, and cross-fitted on the
batch itself, so that no event's estimate has seen its own reward. The events stay the
deployed version's (and the staleness window's): the regression only estimates the reward
of the actions the policy seldom draws (issue 35).
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specialists.base import SpecialistError
from specialists.tab.events import EventStore, LabelledEvent
from specialists.tab.features import from_features
from specialists.tab.loop.versions import PolicyStore

__all__ = ["REWARDS", "TrainReport", "ancestors", "held_out", "named_reward", "reward_of",
           "split_events", "train_from_events"]

REWARDS = ("kept", "accept")
"""The rewards a loop can learn from (config ``loop.reward``): ``kept`` — what was kept
(:class:`~specialists.tab.rewards.KeptReward`: characters still present, the cost of a
dismissal, of an undone accept and of Tab switched off); ``accept`` — the accept key's
old +0.75 / −0.25 (:class:`~specialists.tab.replay.RewardConfig`)."""


def named_reward(name: str) -> Any:
    """The reward called ``name`` (one of :data:`REWARDS`)."""
    from specialists.tab.replay import RewardConfig
    from specialists.tab.rewards import KeptReward

    if name == "kept":
        return KeptReward()
    if name == "accept":
        return RewardConfig()
    raise SpecialistError(f"unknown reward {name!r}; use one of {', '.join(REWARDS)}",
                          param="reward")


@dataclass
class TrainReport:
    parent: int
    version: int
    events_used: int
    off_policy_refused: int
    reward_mean: float
    show_rate: float
    accept_rate: float
    seconds: float
    stats: dict[str, float] = field(default_factory=dict)
    stale_used: int = 0
    """Events of earlier versions (within ``max_staleness``) trained on, importance-weighted."""


def reward_of(event: LabelledEvent, reward: Any) -> float:
    """The reward of the policy's own choice: what a rule showed in its place (a jump, a
    fallback rewrite) or withheld (``held``) is the environment's doing, so the policy's
    action is credited as showing nothing (``LabelledEvent.credited``). A
    :class:`~specialists.tab.rewards.KeptReward` scores what the final report says was kept
    (:meth:`~specialists.tab.rewards.KeptReward.of_event`); any other reward, the accept key."""
    from specialists.tab.rewards import KeptReward

    if isinstance(reward, KeptReward):
        return reward.of_event(event)
    if not event.credited:
        return float(reward(False, False))
    accepted = event.outcome in ("accepted", "partial")
    return float(reward(True, accepted, event.chars_accepted))


def _q_values(events: EventStore, store: PolicyStore, policy: Any, parent: int, window: list[int],
              holdout: float, reward: Any, ridge: float, batch_events: list[LabelledEvent],
              batch: list[Any]) -> tuple[list[Any], int]:
    """Each batch sample's reward estimates (:func:`~specialists.tab.loop.bandit.cross_fitted_values`)
    from a ridge regression over the lineage's earlier events and the batch's other fold; and
    how many shown events it was fitted on. An event a rule answered in the policy's place
    (not ``credited``) says nothing of what the policy's action pays: left out of the fit."""
    from specialists.tab.loop.bandit import LinUCB, cross_fitted_values

    n_feat = policy.config.n_action
    model = LinUCB.like(policy, alpha=0.0, ridge=ridge, reward_none=float(getattr(reward, "none", 0.0)))
    history: list[LabelledEvent] = []
    for v in ancestors(store, parent, 1_000_000):
        if v not in window:
            history += split_events(events.labelled(str(v)), holdout)[0]
    before = model.update([(from_features(e.features, n_feat), int(e.action), reward_of(e, reward))
                           for e in history if e.credited])
    examples = [(s.obs, s.action.index if e.credited else 0, s.reward) for e, s in zip(batch_events, batch)]
    values = cross_fitted_values(model, examples)
    return values, before + sum(1 for _, i, _ in examples if i > 0)


def code_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def held_out(request_id: str, share: float) -> bool:
    """Is this event in the held-out part? A hash of its id decides, so the trainer and the
    gate agree on the split without sharing state, and a rerun splits the same way."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(request_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % 10_000 < share * 10_000


def split_events(labelled: list[LabelledEvent], share: float
                 ) -> tuple[list[LabelledEvent], list[LabelledEvent]]:
    """(train, held out): the gate judges a candidate on events it was not trained on."""
    train: list[LabelledEvent] = []
    held: list[LabelledEvent] = []
    for event in labelled:
        (held if held_out(event.request_id, share) else train).append(event)
    return train, held


def ancestors(store: PolicyStore, version: int, k: int) -> list[int]:
    """``version``'s last ``k`` ancestors by lineage, nearest first (fewer at the root)."""
    out: list[int] = []
    v: int | None = version
    while len(out) < k and v is not None:
        try:
            parent = store.lineage(v).get("parent")
        except SpecialistError:
            break
        v = int(parent) if parent is not None else None
        if v is not None:
            out.append(v)
    return out


def train_from_events(events: EventStore, store: PolicyStore, *, min_events: int = 1,
                      reward: Any = None, holdout: float = 0.0,
                      labelled: list[LabelledEvent] | None = None, ppo: Any = None,
                      q_model: bool = False, q_ridge: float = 1.0) -> TrainReport:
    """One PPO update on the deployed version's labelled events; publishes v+1.

    ``holdout``: the share of events kept out of training for the gate (``split_events``).
    ``labelled``: those events, when the caller has already read them from ``events``.
    ``ppo``: a :class:`~specialists.tab.policy.PPOConfig` (default: its defaults, on-policy
    only); with ``max_staleness > 0`` the last ancestors' events are added, weighted.
    ``q_model``: the reward regression as control variate (the module's docstring), with
    ridge ``q_ridge``."""
    from specialists.tab.policy import Action, PPOConfig, Sample, TabPolicy
    from specialists.tab.replay import RewardConfig

    reward = reward or RewardConfig()
    ppo = ppo or PPOConfig()
    t0 = time.monotonic()
    parent = store.deployed()
    if parent is None:
        raise SpecialistError(f"no deployed policy under {store.root}; deploy one first "
                         "(complement loop deploys the shipped checkpoint)")
    policy = TabPolicy.load(store.path(parent))
    if labelled is None:
        labelled = events.labelled(str(parent))
    elif any(e.policy_version != str(parent) for e in labelled):
        raise SpecialistError(f"the events given are not all version {parent}'s, the "
                              "deployed one; off-policy events are not trained on")
    window = ancestors(store, parent, ppo.max_staleness) if ppo.max_staleness > 0 else []
    old: list[LabelledEvent] = []
    for v in window:
        old += events.labelled(str(v))
    labelled, _ = split_events(labelled, holdout)
    old, _ = split_events(old, holdout)
    refused = events.count_outside([str(parent), *map(str, window)])
    if len(labelled) < min_events:
        raise SpecialistError(f"only {len(labelled)} labelled events for version {parent} "
                         f"(need {min_events}); collect more first")
    n_feat = policy.config.n_action
    samples = [Sample(from_features(e.features, n_feat),
                      Action(index=int(e.action), logprob=e.logprob, version=parent),
                      reward_of(e, reward)) for e in labelled]
    stale = [Sample(from_features(e.features, n_feat),
                    Action(index=int(e.action), logprob=e.logprob, version=int(e.policy_version)),
                    reward_of(e, reward)) for e in old]
    q_values = None
    if q_model:
        q_values, fitted = _q_values(events, store, policy, parent, window, holdout, reward, q_ridge,
                                     labelled + old, samples + stale)
    stats = policy.ppo_update(samples + stale, ppo, versions={parent, *window}, q_values=q_values)
    if q_model:
        stats["tab/q_events"] = float(fitted)
    # A gate may have held back an earlier child of this parent: never reuse a number.
    policy.version = max(policy.version, max(store.versions(), default=0) + 1)
    shown = [e for e in labelled if e.credited]  # the policy's own shows
    accepted = [e for e in shown if e.outcome in ("accepted", "partial")]
    rewards = [s.reward for s in samples]
    report = TrainReport(parent=parent, version=policy.version, events_used=len(samples),
                         off_policy_refused=refused, reward_mean=sum(rewards) / len(rewards),
                         show_rate=len(shown) / len(labelled),
                         accept_rate=len(accepted) / max(1, len(shown)),
                         seconds=time.monotonic() - t0, stats=stats, stale_used=len(stale))
    with tempfile.TemporaryDirectory() as tmp:
        policy.save(tmp)
        store.publish(tmp, policy.version, {
            "parent": parent, "events_used": report.events_used,
            "off_policy_refused": refused, "stale_used": len(stale), "reward_mean": report.reward_mean,
            "show_rate": report.show_rate, "accept_rate": report.accept_rate,
            "code_revision": code_revision(), "train_stats": stats})
    return report
