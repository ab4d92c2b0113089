"""A user world, measured (issue 35, first step): each population against the same policies.

    python benchmarks/users.py ../shared/data/commits --populations configs/users/default.yaml,...

For each population (and the oracle: no population), on the held-out projects' edits: show
rate, accept rate (accept keys over suggestions seen), the old reward per request
(+0.75/−0.25), the reward of what was kept (``users.KeptReward``) and characters kept per
1,000 keystrokes, for three policies: ``always`` (the LM's greedy line, baseline (a)),
``always_ensemble`` (always the shipped checkpoint's default candidate: the longest
context copy, else the LM's line) and ``shipped`` (the shipped policy, greedy). Prints a
table and a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specialists.tab import baselines as B  # noqa: E402
from specialists.tab.data import load_split  # noqa: E402
from specialists.tab.features import ObserveConfig  # noqa: E402
from specialists.tab.harness import ObservationCache, run  # noqa: E402
from specialists.tab.users import KeptReward, World, load_population  # noqa: E402

COLS = ("requests", "show_rate", "accept_rate", "reward_per_request", "kept_reward_per_request",
        "chars_saved_per_1000", "chars_kept_per_1000", "switched_off")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory of NAME.jsonl.gz commit files")
    p.add_argument("--populations", default=",".join(str(x) for x in sorted((REPO / "configs/users").glob("*.yaml"))),
                   help="comma-separated population files (default: every file in configs/users)")
    p.add_argument("--test", default="test", metavar="PROJECTS", help="held-out projects typed")
    p.add_argument("--test-per-project", type=int, default=40, help="edits per project (0: all)")
    p.add_argument("--people", type=int, default=16, help="people drawn per population")
    p.add_argument("--seed", type=int, default=0, help="edits sampled (and people drawn)")
    p.add_argument("--people-seed", type=int, default=None, help="people drawn (default: --seed)")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint")
    p.add_argument("--cache-dir", default="runs/tab_cache")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="benchmarks/out/users.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = _args(argv)
    import torch

    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(args.threads)
    t0 = time.time()
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=args.threads).load()
    policy = TabPolicy.load(ckpt)
    full = ObservationCache.kept_in(args.cache_dir, lm, ObserveConfig(), ckpt)
    lm_only = ObservationCache.kept_in(args.cache_dir, lm, ObserveConfig(copy=False, lm_generate="always"), ckpt)
    test = load_split(args.data, args.test, args.test_per_project, seed=args.seed)

    def shipped(req, obs):
        return policy.act(obs, sample=False).suggestion

    deciders = {"always": (B.always, lm_only), "always_ensemble": (B.always_ensemble, full),
                "shipped": (shipped, full)}
    pops: list[tuple[str, object]] = [("(none: oracle)", None)]
    pops += [(Path(f).stem, load_population(f)) for f in args.populations.split(",") if f]
    kept = KeptReward()
    results: dict[str, dict[str, dict]] = {}
    for name, pop in pops:
        results[name] = {}
        for policy_name, (decide, cache) in deciders.items():
            seed = args.seed if args.people_seed is None else args.people_seed
            world = World(pop, seed=seed, people=args.people) if pop is not None else None
            m = run(test, decide, cache, ask_after_edit=True, world=world, kept=kept)
            results[name][policy_name] = {**m.summary(), **m.kept_summary()}
            print(json.dumps({"population": name, "policy": policy_name, **results[name][policy_name]}),
                  file=sys.stderr, flush=True)
    full.save()
    lm_only.save()
    print("| population | policy | " + " | ".join(COLS) + " |")
    print("|---" * (len(COLS) + 2) + "|")
    for name, by_policy in results.items():
        for policy_name, r in by_policy.items():
            print(f"| {name} | {policy_name} | " + " | ".join(str(r[c]) for c in COLS) + " |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    summary = {"benchmark": "users", "test": args.test, "edits": len(test), "people": args.people,
               "seed": args.seed, "people_seed": args.people_seed, "kept_reward": kept.__dict__, "commit": commit,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
               "seconds": round(time.time() - t0, 1), "results": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
