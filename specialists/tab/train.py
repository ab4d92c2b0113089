"""Train the Tab policy by REINFORCE with a learned baseline on its own replayed decisions.

    complement tab train --checkpoint specialists/tab/checkpoint --updates 300

Each update replays a batch of training-project edits with the current policy *sampling*
its actions (which candidate, where to cut it, or nothing); the simulated user accepts or
rejects; every sample carries the policy version that drew it, and ``train_step`` takes
only the current version's (the online loop's rule). Rewards per request: +0.75 accepted,
−0.25 rejected, 0 nothing shown, plus an optional bonus per accepted character. Each
decision is its own episode (no discounting across requests), as Cursor describes its
Tab training. The dev project picks the best version; the test projects are never read.

The LM is frozen here (its hidden state and token scores are features); gradients reach
which candidate to show, how much of it and whether to show at all.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specialists.tab.data import load_split
from specialists.tab.features import ObserveConfig
from specialists.tab.harness import Metrics, ObservationCache, run
from specialists.tab.policy import PolicyConfig, Sample, TabPolicy
from specialists.tab.replay import RewardConfig

__all__ = ["Args", "train", "plot_curve"]


@dataclass
class Args:
    data: str = "../shared/data/commits"
    """Directory of ``NAME.jsonl.gz`` commit files (split by project: ``data.SPLIT``)."""
    checkpoint: str = "specialists/tab/checkpoint"
    """LM checkpoint (``tokenizer.json`` + model); empty: copy candidates only, no LM features."""
    out: str = "runs/tab_policy"
    """Where the best policy, the curve (JSON + PNG) and the summary go."""
    train_split: str = "train"
    """Projects to train on: a split of ``data.SPLIT`` or one project's name."""
    dev_split: str = "dev"
    """Projects that pick the best version (never the test split)."""
    train_per_project: int = 40
    """Edits sampled per training project (0: all)."""
    dev_per_project: int = 60
    """Edits of the dev project used to pick the best version (0: all)."""
    updates: int = 300
    """Policy-gradient updates (REINFORCE with the learned baseline)."""
    pairs_per_update: int = 16
    """Edits replayed per update: the batch of on-policy samples."""
    lr: float = 3e-3
    """Adam learning rate of the policy head."""
    width: int = 64
    """Hidden width of the policy head."""
    ent_coef: float = 0.01
    """Entropy bonus weight (keeps the policy exploring)."""
    vf_coef: float = 0.5
    """Value-head loss weight."""
    normalize_advantages: bool = False
    """Scale advantages by their running standard deviation."""
    reward_accept: float = 0.75
    """Reward of a shown suggestion the simulated user accepts."""
    reward_reject: float = -0.25
    """Reward of a shown suggestion the user rejects."""
    reward_none: float = 0.0
    """Reward of showing nothing."""
    reward_per_char: float = 0.0
    """Training bonus per accepted character (the length-scaled variant); 0 trains on the plain reward."""
    population: str = ""
    """A population file (``configs/users/*.yaml``, issue 35) whose people answer in training
    and on dev; empty: the oracle (the shipped checkpoint's recipe)."""
    reward: str = "accept"
    """``accept``: the reward_* figures above, of the accept key; ``kept``: ``users.KeptReward``,
    of what was kept."""
    eval_every: int = 20
    """Greedy dev evaluation every this many updates (the best version is kept)."""
    seed: int = 0
    """Seeds the edit samples, the policy's weights and its draws."""
    threads: int = 1
    """torch CPU threads."""
    context_tokens: int = 64
    """LM prompt length in tokens (the served LM must use the same)."""
    prompt_anchor: int = 16
    """How the LM cuts its prompts (``TabLM(anchor=...)``), as the served LM does."""
    cache_dir: str = "runs/tab_cache"
    """Keep observations (candidates, LM features) on disk, shared with the benchmark; empty: off."""
    quiet: bool = False
    """Print no progress rows."""


def _log(args: Args, row: dict[str, Any]) -> None:
    if not args.quiet:
        print(json.dumps(row), flush=True)


def train(args: Args) -> dict[str, Any]:
    """Run the training loop; returns the summary written to ``out/train.json``."""
    import torch

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lm = None
    if args.checkpoint:
        from specialists.tab.lm import TabLM

        lm = TabLM(args.checkpoint, context_tokens=args.context_tokens, threads=args.threads,
                   anchor=args.prompt_anchor).load()
    config = ObserveConfig(use_lm=lm is not None)
    cache = ObservationCache.kept_in(args.cache_dir, lm, config, args.checkpoint)
    train_pairs = load_split(args.data, args.train_split, args.train_per_project, seed=args.seed)
    dev_pairs = load_split(args.data, args.dev_split, args.dev_per_project, seed=args.seed)
    train_reward: Any = RewardConfig(args.reward_accept, args.reward_reject, args.reward_none, args.reward_per_char)
    if args.reward not in ("accept", "kept"):
        raise ValueError(f"reward: {args.reward!r} is not one of accept, kept")
    if args.reward == "kept":
        from specialists.tab.users import KeptReward

        train_reward = KeptReward()
    population = None
    if args.population:
        from specialists.tab.users import load_population

        population = load_population(args.population)

    def world(seed: int) -> Any:
        from specialists.tab.users import World

        return World(population, seed=seed) if population is not None else None

    people = world(args.seed)  # the training people keep their state from update to update
    plain = RewardConfig()

    # One pass showing nothing fills the cache and gives the feature scales.
    t0 = time.time()
    seen: list = []

    def collect(req, obs):
        seen.append(obs)  # show nothing: the replay visits every trigger point

    run(train_pairs, collect, cache)
    policy = TabPolicy(PolicyConfig(hidden_size=lm.hidden_size if lm else 0, width=args.width, lr=args.lr,
                                    ent_coef=args.ent_coef, vf_coef=args.vf_coef,
                                    normalize_advantages=args.normalize_advantages), seed=args.seed)
    policy.fit_normalizer(seen)
    del seen
    run(dev_pairs, lambda req, obs: None, cache)
    cache.save()
    _log(args, {"tab/cache": len(cache), "tab/feature_seconds": round(time.time() - t0, 1)})

    curve: list[dict[str, Any]] = []
    best: dict[str, Any] = {"reward_per_request": -float("inf")}
    rng = random.Random(args.seed)
    for update in range(1, args.updates + 1):
        batch = rng.sample(train_pairs, min(args.pairs_per_update, len(train_pairs)))
        samples: list[Sample] = []
        plain_metrics = Metrics()
        drawn: dict[int, Any] = {}

        def decide(req, obs):  # the policy samples its own action
            action = policy.act(obs, sample=True)
            drawn["action"] = action
            return action.suggestion

        def record(req, obs, sug, outcome):
            samples.append(Sample(obs=obs, action=drawn["action"], reward=outcome.reward))
            plain_metrics.add(type(outcome)(outcome.shown, outcome.accepted, outcome.chars_saved,
                                            plain(outcome.shown, outcome.accepted, outcome.chars_saved)))

        m = run(batch, decide, cache, reward=train_reward, on_step=record, world=people)
        plain_metrics.chars_total = m.chars_total
        stats = policy.train_step(samples)
        row = {"update": update, "version": policy.version, **stats,
               **{f"train/{k}": v for k, v in plain_metrics.summary().items() if not k.endswith("_ms")}}
        if update % args.eval_every == 0 or update == args.updates:
            dev = run(dev_pairs, lambda req, obs: policy.act(obs, sample=False).suggestion, cache,
                      world=world(args.seed + 1)).summary()  # the same fresh people at each evaluation
            row.update({f"dev/{k}": v for k, v in dev.items() if not k.endswith("_ms")})
            if dev["reward_per_request"] > best["reward_per_request"]:
                best = {**dev, "update": update, "version": policy.version}
                policy.save(out, meta={"train_args": asdict(args), "dev": dev, "update": update})
        curve.append(row)
        _log(args, row)

    cache.save()
    summary = {"args": asdict(args), "best": best, "cache": len(cache),
               "minutes": round((time.time() - t0) / 60, 2), "curve": curve}
    (out / "train.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_curve(curve, out / "tab_training_curve.png")
    return summary


def plot_curve(curve: list[dict[str, Any]], path: str | Path) -> None:
    """Reward per request, accept rate and show rate against updates (train rollouts + dev)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("reward_per_request", "reward / request"), ("accept_rate", "accept rate"),
            ("show_rate", "show rate")]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), dpi=80)
    xs = [r["update"] for r in curve]
    for ax, (key, title) in zip(axes, keys):
        ys = [r[f"train/{key}"] for r in curve]
        smooth, acc = [], None
        for y in ys:
            acc = y if acc is None else 0.9 * acc + 0.1 * y
            smooth.append(acc)
        ax.plot(xs, ys, color="0.8", lw=0.8)
        ax.plot(xs, smooth, label="train rollouts (sampled)", lw=1.5)
        dev = [(r["update"], r[f"dev/{key}"]) for r in curve if f"dev/{key}" in r]
        if dev:
            ax.plot(*zip(*dev), "o-", label="dev project (greedy)", ms=3)
        ax.set_title(title)
        ax.set_xlabel("updates")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
