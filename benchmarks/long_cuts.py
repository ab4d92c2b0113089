"""What would serving one kind of person long suggestions be worth? (issue 35, line 2)

    python benchmarks/long_cuts.py ../shared/data/commits --project httpx \\
        --population configs/users/mixed-length.yaml --kind liner --min-chars 20

A diagnostic, told who is typing (no learner can be): on the project's later history (the
edits ``loop_learn.py`` measures on, one draw of people), people of ``--kind`` are shown one
cut of at least ``--min-chars`` characters on every request that has one, everyone else
nothing, in two ways:

* ``longest`` — the longest such cut;
* ``favourite`` — the shipped policy's favourite such cut (highest logit), and only where its
  logit is within ``margin`` of the policy's "show nothing" (each of ``--margins``; ``none``:
  always).

Per rule it prints that kind's requests, the cuts shown and accepted, the precision
(accepted / shown), the mean reward of an accepted and of a dismissed one, and the reward
per request of that kind (kept reward, ``--reward``). The break-even precision is where the
accepted ones' reward pays for the dismissals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import loop_learn as L  # noqa: E402


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="folder of mined pairs (e.g. ../shared/data/commits)")
    p.add_argument("--project", required=True, help="the project whose later history is replayed")
    p.add_argument("--population", required=True, help="a population YAML (configs/users/)")
    p.add_argument("--kind", required=True, help="the population's type shown the long cuts")
    p.add_argument("--min-chars", type=int, default=20, help="shortest cut shown")
    p.add_argument("--margins", default="none,-4,-2,0",
                   help="favourite: show where its logit − the 'nothing' logit ≥ margin (none: always)")
    p.add_argument("--collect-share", type=float, default=0.7, help="as loop_learn.py: the later history follows it")
    p.add_argument("--reward", choices=["kept", "accept"], default="kept")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint")
    p.add_argument("--cache-dir", default="runs/learn_cache", help="loop_learn.py's observation cache")
    args = p.parse_args(argv)

    from specialists.tab.users import PopulationError, load_population

    try:
        L.POPULATION = load_population(args.population)
    except PopulationError as exc:
        raise SystemExit(f"--population: {exc}") from exc
    kinds = [t.name for t in L.POPULATION.types]
    if args.kind not in kinds:
        raise SystemExit(f"--kind {args.kind!r}: the population's types are {', '.join(kinds)}")
    try:
        margins = [None if m.strip() == "none" else float(m) for m in args.margins.split(",") if m.strip()]
    except ValueError:
        raise SystemExit(f"--margins {args.margins!r}: comma-separated numbers or 'none'") from None
    L.ASK_AFTER_EDIT = True
    L.MEASURE_WORLDS = 1

    import torch

    from specialists.tab.features import ObserveConfig
    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(1)
    ckpt = Path(args.checkpoint)
    lm = TabLM(ckpt, threads=1).load()
    cache = L.ObservationCache.kept_in(args.cache_dir, lm, ObserveConfig(), ckpt)
    policy = TabPolicy.load(ckpt)
    reward = L.KeptReward() if args.reward == "kept" else L.RewardConfig()
    pairs = sorted(L.load_split(args.data, args.project, 0, seed=0), key=lambda q: q.date)
    later = pairs[int(round(args.collect_share * len(pairs))):]
    if not later:
        raise SystemExit(f"--project {args.project}: no later history to replay")

    def decider(rule: str, margin: float | None) -> L.DecideMany:
        def decide(obs, who):
            logits = policy._head_numpy(*policy._arrays(obs))[0] if rule == "favourite" else None
            out = []
            for b, (o, kind) in enumerate(zip(obs, who)):
                pick = 0
                if kind == args.kind:
                    rows = [r for r in range(len(o.rows)) if len(o.suggestion(r).text) >= args.min_chars]
                    if rows and rule == "longest":
                        pick = 1 + max(rows, key=lambda r: len(o.suggestion(r).text))
                    elif rows:
                        r = max(rows, key=lambda r: logits[b, r + 1])
                        if margin is None or logits[b, r + 1] - logits[b, 0] >= margin:
                            pick = r + 1
                out.append(L.Decision(pick))
            return out
        decide.by_kind = True  # type: ignore[attr-defined]
        return decide  # type: ignore[return-value]

    results = []
    for rule, margin in [("longest", None)] + [("favourite", m) for m in margins]:
        steps = L.measure_rollout(later, cache, decider(rule, margin), reward, L.Totals())
        mine = [s for s in steps if s.person == args.kind]
        shown = [s for s in mine if s.outcome.shown]
        took = [s.outcome.reward for s in shown if s.outcome.accepted]
        left = [s.outcome.reward for s in shown if not s.outcome.accepted]
        row = {"rule": rule, "margin": margin, "requests": len(mine), "shown": len(shown), "accepted": len(took),
               "precision": round(len(took) / max(1, len(shown)), 4),
               "reward_accepted": round(sum(took) / max(1, len(took)), 3),
               "reward_dismissed": round(sum(left) / max(1, len(left)), 3),
               "reward_per_request": round(sum(s.outcome.reward for s in mine) / max(1, len(mine)), 4)}
        results.append(row)
        print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return results


if __name__ == "__main__":
    main()
