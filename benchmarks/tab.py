"""Tab benchmark: the RL policy against baselines (a)–(e) on held-out projects.

    python benchmarks/tab.py ../shared/data/commits
    python benchmarks/tab.py HISTORIES --train a,b --dev c --test d,e   # any folder of NAME.jsonl.gz

Replays edits of the test projects (``--test``; default ``specialists.tab.data.SPLIT["test"]``,
never used for training or tuning) through the simulated user; thresholds of (c), (d), (e) are tuned on
the dev project, Copilot's filter (b) is fitted on (a)'s logged outcomes on the training
projects. Latency is measured per request, one at a time, warm, without the feature cache,
each policy with only the work it needs (copy alone runs no LM). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specialists.tab import baselines as B  # noqa: E402
from specialists.tab.data import load_split, split_projects  # noqa: E402
from specialists.tab.features import COPILOT_FEATURES, ObserveConfig, copilot_features  # noqa: E402
from specialists.tab.harness import ObservationCache, cache_path, measure_latency, run  # noqa: E402
from specialists.tab.replay import Session  # noqa: E402

CONF_GRID = [-0.25, -0.5, -0.75, -1.0, -1.5, -2.0, -2.5, -3.0, -4.0, -6.0, float("inf")]
COPY_GRID = [4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 10**9]
TRUNC_GRID = [-0.1, -0.2, -0.35, -0.5, -0.75, -1.0, -1.5, -2.0, -3.0]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="directory of NAME.jsonl.gz commit files")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint", help="LM + policy directory")
    p.add_argument("--test-per-project", type=int, default=100, help="edits per test project (0: all)")
    p.add_argument("--dev-per-project", type=int, default=60, help="dev edits for tuning (c), (d), (e)")
    p.add_argument("--train-per-project", type=int, default=20, help="edits per training project for (b)'s fit")
    p.add_argument("--cache-dir", default="runs/tab_cache", help="observation cache shared with training ('' : off)")
    p.add_argument("--latency-requests", type=int, default=300)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompt-anchor", type=int, default=16,
                   help="the LM prompt's start moves in steps of this many tokens (0: sliding)")
    p.add_argument("--train", default="train", metavar="PROJECTS",
                   help="projects that fit (b) (a split name or comma-separated NAMEs of DATA/NAME.jsonl.gz)")
    p.add_argument("--dev", default="dev", metavar="PROJECTS", help="projects that tune (c), (d), (e)")
    p.add_argument("--test", default="test", metavar="PROJECTS",
                   help="held-out projects every policy is scored on")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-log", default=None, help="train.json of `complement tab train` to plot")
    p.add_argument("--curve", default="benchmarks/tab_training_curve.png")
    p.add_argument("--out", default="benchmarks/out/tab.json")
    return p.parse_args(argv)


def _fit_copilot(pairs, cache) -> B.CopilotFilter:
    """Log (a)'s outcomes on training projects, fit the logistic regression on them."""
    X, y = [], []

    def log(req, obs, sug, out):
        if out.shown:
            X.append(copilot_features(req))
            y.append(int(out.accepted))

    run(pairs, B.always, cache, on_step=log)
    if len(set(y)) < 2:  # nothing (or everything) accepted: the filter has nothing to learn
        return B.CopilotFilter(weights=[0.0] * len(COPILOT_FEATURES), bias=-10.0 if not any(y) else 10.0)
    return B.CopilotFilter.fit(X, y)


def _warm(cache, splits: dict) -> None:
    """Compute every observation once (the slow part: the LM), with a progress bar."""
    from tqdm import tqdm

    for name, pairs in splits.items():
        for pair in tqdm(pairs, desc=f"features {name}", unit="edit", file=sys.stderr):
            run([pair], lambda req, obs: None, cache)
    cache.save()


def _table(results: dict) -> str:
    cols = ["requests", "show_rate", "accept_rate", "reward_per_request", "chars_saved_per_1000",
            "p50_ms", "p99_ms"]
    lines = ["| policy | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in results.items():
        lines.append(f"| {name} | " + " | ".join(str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def _latency_requests(pairs, n: int, seed: int):
    reqs = []
    for pair in pairs:
        s = Session(pair)
        while (r := s.next_request()) is not None:
            reqs.append(r)
            s.respond(None)
    random.Random(seed).shuffle(reqs)
    return reqs[:n]


def main(argv: list[str] | None = None) -> dict:
    args = _args(argv)
    import torch

    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(args.threads)
    t_start = time.time()
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=args.threads, anchor=args.prompt_anchor).load()
    policy = TabPolicy.load(ckpt)
    full = ObserveConfig()  # what the RL policy sees
    lm_only = ObserveConfig(copy=False, lm_generate="always")  # what (a), (b), (c), (e) see

    def make_cache(cfg: ObserveConfig) -> ObservationCache:
        path = cache_path(args.cache_dir, ckpt, cfg, lm.context_tokens, lm.anchor) if args.cache_dir else None
        return ObservationCache(lm, cfg, path)

    cache, cache_lm = make_cache(full), make_cache(lm_only)
    train = load_split(args.data, args.train, args.train_per_project, seed=args.seed)
    dev = load_split(args.data, args.dev, args.dev_per_project, seed=args.seed)
    test = load_split(args.data, args.test, args.test_per_project, seed=args.seed)

    _warm(cache, {"dev": dev, "test": test})
    _warm(cache_lm, {"LM-only train (b) fit": train, "LM-only dev": dev, "LM-only test": test})
    copilot = _fit_copilot(train, cache_lm)

    def dev_reward(decide, c=cache_lm) -> float:
        return run(dev, decide, c).summary()["reward_per_request"]

    tau_c, _ = B.tune(CONF_GRID, B.confidence, dev_reward)
    min_m, _ = B.tune(COPY_GRID, B.copy_min_match, lambda d: dev_reward(d, cache))
    tau_e, _ = B.tune(TRUNC_GRID, B.truncate, dev_reward)

    def rl(req, obs):
        return policy.act(obs, sample=False).suggestion

    # name: (decider, the observations it is scored on, what its latency run computes)
    deciders: dict[str, tuple[Any, ObservationCache, ObserveConfig]] = {
        "always": (B.always, cache_lm, lm_only),
        "copilot_filter": (copilot, cache_lm, lm_only),
        "confidence": (B.confidence(tau_c), cache_lm, lm_only),
        "copy": (B.copy_min_match(min_m), cache, ObserveConfig(use_lm=False)),
        "truncate": (B.truncate(tau_e), cache_lm, lm_only),
        "rl": (rl, cache, full),
        "always_ensemble": (B.always_ensemble, cache, full),
    }
    lat_reqs = _latency_requests(test, args.latency_requests, args.seed)
    results = {}
    for name, (decide, observations, cfg) in deciders.items():
        m = run(test, decide, observations)
        m.latencies_ms = measure_latency(lat_reqs, decide, lm if cfg.use_lm else None, cfg)
        results[name] = m.summary()
        print(json.dumps({name: results[name]}), file=sys.stderr, flush=True)

    if args.train_log:
        from specialists.tab.train import plot_curve

        plot_curve(json.loads(Path(args.train_log).read_text())["curve"], args.curve)

    a, r = results["always"], results["rl"]
    baseline_keys = ("copilot_filter", "confidence", "copy", "truncate")
    targets = {
        "show_reduction_vs_always": round(1 - r["show_rate"] / max(a["show_rate"], 1e-9), 4),
        "accept_rate_gain_vs_always": round(r["accept_rate"] / max(a["accept_rate"], 1e-9) - 1, 4),
        "reward_beats_all_baselines": all(r["reward_per_request"] > results[k]["reward_per_request"]
                                          for k in ("always", *baseline_keys)),
        "chars_saved_at_least_best_b_to_e": r["chars_saved_per_1000"] >= max(
            results[k]["chars_saved_per_1000"] for k in baseline_keys),
        "p99_under_50ms": r["p99_ms"] < 50,
    }
    summary = {
        "benchmark": "tab", "split": {k: list(split_projects(v)) for k, v in
                                     (("train", args.train), ("dev", args.dev), ("test", args.test))},
        "edits": {"train_for_copilot_fit": len(train), "dev": len(dev), "test": len(test)},
        "tuned_on_dev": {"confidence_mean_logprob": tau_c, "copy_min_match": min_m,
                         "truncate_logprob": tau_e},
        "copilot_weights": {k: round(v, 3) for k, v in copilot.named_weights().items() if abs(v) > 1e-3},
        "copilot_bias": round(copilot.bias, 3),
        "policy_version": policy.version, "checkpoint": str(ckpt),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, torch threads={args.threads}, "
                   f"load average at end {os.getloadavg()[0]:.1f}",
        "seconds": round(time.time() - t_start, 1), "targets": targets, "policies": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(_table(results))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
