"""How well does the next-edit model predict the editable region's next state? (issue 15)

    python benchmarks/next_edit.py DATA --model runs/next_edit [--projects test] [--per-project 100]

On projects no training step saw (``--projects``: a ``data.SPLIT`` name or comma-separated
names; default ``test``), every pair of a seeded sample is cut into edit-replay examples
(``specialists.tab.next_edit.examples``, the training format): ``typing`` — the hunk is
being typed, the next state finishes it; ``done`` — a hunk is done, the next state makes the
next hunk where it lies in the region, else leaves the region as it is.

Three predictors of the next state, each scored on the same examples:

* ``unchanged``: the region as it is (never proposes an edit);
* ``repeat``: the latest edit repeated — its old text's next occurrence after the cursor in
  the region replaced by its new text (rename propagation), else unchanged;
* ``model``: the trained model, decoded speculatively from the region.

Per kind: examples, how many change the region; per predictor: edits proposed, exact
(the proposed region equals the next state, byte for byte), precision (exact / proposed),
recall (exact / changing examples), and right about "nothing here" (proposes nothing where
nothing changes). The model's decode: ms per example (p50, p99, one thread, on this machine),
tokens written, and the share of them the draft supplied. Last line: JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specialists.tab.data import load_split  # noqa: E402
from specialists.tab.next_edit import NextEditModel, examples, repeat_latest  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory of NAME.jsonl.gz commit files")
    p.add_argument("--model", required=True, help="a folder written by python -m specialists.tab.next_edit")
    p.add_argument("--projects", default="test", help="split name or comma-separated projects, none trained on")
    p.add_argument("--per-project", type=int, default=100, help="pairs sampled per project (0: all)")
    p.add_argument("--typing-per-hunk", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="at most this many examples per kind (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="", help="write the JSON summary here too")
    args = p.parse_args(argv)

    try:
        model = NextEditModel(args.model, threads=args.threads)
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    trained = json.loads((Path(args.model) / "train.json").read_text()) if \
        (Path(args.model) / "train.json").is_file() else {}
    pairs = load_split(args.data, args.projects, args.per_project, seed=args.seed)
    overlap = set(trained.get("projects", ())) & {q.repo for q in pairs}
    if overlap:
        raise SystemExit(f"the model was trained on {', '.join(sorted(overlap))}: measure on other projects")
    rng = random.Random(args.seed)
    by_kind: dict[str, list] = defaultdict(list)
    for pair in pairs:
        for ex in examples(pair, typing_per_hunk=args.typing_per_hunk, rng=rng):
            by_kind[ex.kind].append(ex)
    if args.limit:
        by_kind = {k: random.Random(k).sample(v, min(args.limit, len(v))) for k, v in by_kind.items()}
    t0 = time.time()
    results: dict[str, Any] = {}
    ms: list[float] = []
    written = drafted = unfinished = 0
    for kind in sorted(by_kind):
        exs = by_kind[kind]
        counts: dict[str, dict[str, int]] = {name: defaultdict(int) for name in ("unchanged", "repeat", "model")}
        for i, ex in enumerate(exs):
            started = time.perf_counter()
            pred, stats = model.predict(ex.prompt, ex.region)
            ms.append((time.perf_counter() - started) * 1000)
            written += stats.tokens
            drafted += stats.accepted
            unfinished += pred is None
            changes = ex.target != ex.region
            for name, guess in (("unchanged", ex.region), ("repeat", repeat_latest(ex)),
                                ("model", ex.region if pred is None else pred)):
                c = counts[name]
                proposed = guess != ex.region
                c["proposed"] += proposed
                c["exact"] += proposed and guess == ex.target
                c["quiet_right"] += not proposed and not changes
            if (i + 1) % 200 == 0:
                print(f"{kind}: {i + 1} of {len(exs)}", file=sys.stderr, flush=True)
        changing = sum(ex.target != ex.region for ex in exs)
        results[kind] = {"examples": len(exs), "changing": changing}
        for name, c in counts.items():
            results[kind][name] = {
                "proposed": c["proposed"], "exact": c["exact"],
                "precision": round(c["exact"] / c["proposed"], 4) if c["proposed"] else None,
                "recall": round(c["exact"] / changing, 4) if changing else None,
                "quiet_right": c["quiet_right"], "quiet_cases": len(exs) - changing}
    print("| kind | examples | changing | predictor | proposed | exact | precision | recall | quiet where nothing changes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, r in results.items():
        for name in ("unchanged", "repeat", "model"):
            c = r[name]
            print(f"| {kind} | {r['examples']:,} | {r['changing']:,} | {name} | {c['proposed']:,} | {c['exact']:,} | "
                  f"{c['precision'] if c['precision'] is not None else '—'} | {c['recall']} | "
                  f"{c['quiet_right']:,} of {c['quiet_cases']:,} |")
    summary = {"projects": sorted({q.repo for q in pairs}), "pairs": len(pairs), "results": results,
               "model": {"folder": args.model, "parameters": trained.get("parameters"),
                         "trained_on": trained.get("projects"), "val_loss": trained.get("final_val_loss"),
                         "unfinished": unfinished, "ms_p50": round(percentile(ms, 0.5), 1),
                         "ms_p99": round(percentile(ms, 0.99), 1), "tokens_written": written,
                         "draft_share": round(drafted / written, 4) if written else None},
               "seconds": round(time.time() - t0, 1),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} thread(s), no GPU"}
    print(json.dumps(summary))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
