"""Score a Tab checkpoint's policy greedily on one split of replayed edits, exactly as
``complement tab train`` scores its dev split (same sample, same replay, same cache).

A checkpoint here is a folder holding the LM (tokenizer, config, weights) and a policy
(``policy.json`` + ``policy.safetensors``); to score a policy trained on another LM, copy
both into one folder. Observations are cached per LM under ``--cache-dir``, shared with the
trainer, so scoring after training costs seconds.

    python benchmarks/tab_policy_eval.py ../shared/data/commits --checkpoint DIR --split dev
    python benchmarks/tab_policy_eval.py ../shared/data/commits --checkpoint DIR --split test --per-project 100
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="directory of NAME.jsonl.gz commit files")
    p.add_argument("--checkpoint", default="specialists/tab/checkpoint", help="LM + policy directory")
    p.add_argument("--split", default="dev",
                   help="a split name of specialists.tab.data.SPLIT or comma-separated project NAMEs")
    p.add_argument("--per-project", type=int, default=60, help="edits sampled per project")
    p.add_argument("--seed", type=int, default=0, help="the edit sample's seed (the trainer's --seed)")
    p.add_argument("--context-tokens", type=int, default=0,
                   help="tokens of the LM's prompt (0: as the policy was trained)")
    p.add_argument("--cache-dir", default="runs/tab_cache", help="observation cache ('' : off)")
    args = p.parse_args(argv)

    import torch

    from specialists.tab.data import load_split
    from specialists.tab.features import ObserveConfig
    from specialists.tab.harness import ObservationCache, run
    from specialists.tab.lm import TabLM
    from specialists.tab.policy import TabPolicy

    torch.set_num_threads(1)
    policy = TabPolicy.load(args.checkpoint)
    # the LM reads the prompt the policy's features were computed on
    context_tokens = args.context_tokens or int(policy.trained_with.get("context_tokens", 64))
    anchor = int(policy.trained_with.get("prompt_anchor", 0))
    lm = TabLM(args.checkpoint, context_tokens=context_tokens, threads=1, anchor=anchor).load()
    config = ObserveConfig(use_lm=True)
    cache = ObservationCache.kept_in(args.cache_dir, lm, config, args.checkpoint)
    pairs = load_split(args.data, args.split, args.per_project, seed=args.seed)
    t0 = time.time()
    summary = run(pairs, lambda req, obs: policy.act(obs, sample=False).suggestion, cache).summary()
    cache.save()
    print(json.dumps({"checkpoint": args.checkpoint, "split": args.split, "policy_version": policy.version,
                      "seconds": round(time.time() - t0, 1),
                      **{k: v for k, v in summary.items() if not k.endswith("_ms")}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
