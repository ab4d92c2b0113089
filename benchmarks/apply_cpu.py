"""CPU time of the applier against the plain line-anchor baseline, in one process.

On a shared machine wall time swings with the neighbours' load (±40% between consecutive
runs, BENCHMARKS.md applier round 6); ``time.process_time`` counts this process's CPU
only, and the ratio to the baseline timed beside it cancels most of what remains. Same
sketches as ``benchmarks/apply.py`` (its ``cases``), tokens as there (tiktoken
``cl100k_base`` over the expected file).

    python benchmarks/apply_cpu.py DATA... [--per-project 40] [--generator both] [--seed 0]

Prints one JSON line: sketches, tokens, tokens/s of each (CPU time) and their ratio. The
applier's one-time start (loading, or on a cold cache compiling, its numba kernels:
``applier.warm``, what ``ApplySpecialist.setup`` does) is timed
apart as ``warm_cpu_s`` and left out of the rate; ``applier_tokens_per_cpu_s_with_warm``
counts it in.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.apply import GENERATORS, baseline_apply, cases, load, tokenizer  # noqa: E402
from specialists.apply import apply_sketch  # noqa: E402
from specialists.apply.applier import warm  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="+", type=Path, help="*.jsonl.gz histories or folders")
    parser.add_argument("--per-project", type=int, default=40)
    parser.add_argument("--generator", choices=("lines", "frontier", "both"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    generators = GENERATORS if args.generator == "both" else (args.generator,)
    sketches = list(cases(load(args.data, args.per_project, args.seed), args.seed, generators))
    if not sketches:
        parser.error("no sketches: check the data paths")
    enc = tokenizer()
    tokens = sum(len(enc.encode(c.after, disallowed_special=())) for c in sketches)
    started = time.process_time()
    warm()
    warmed = time.process_time() - started
    applier = baseline = 0.0
    for case in sketches:
        started = time.process_time()
        apply_sketch(case.before, case.sketch, language=case.language, path=case.path)
        applier += time.process_time() - started
        started = time.process_time()
        baseline_apply(case.before, case.sketch)
        baseline += time.process_time() - started
    summary = {
        "sketches": len(sketches), "tokens": tokens,
        "applier_cpu_s": round(applier, 2), "baseline_cpu_s": round(baseline, 2),
        "warm_cpu_s": round(warmed, 2),
        "applier_tokens_per_cpu_s": round(tokens / applier) if applier else 0,
        "baseline_tokens_per_cpu_s": round(tokens / baseline) if baseline else 0,
        "ratio_to_baseline": round(baseline / applier, 4) if applier else 0.0,
        "applier_tokens_per_cpu_s_with_warm": round(tokens / (applier + warmed)) if applier else 0,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
