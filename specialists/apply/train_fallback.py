"""Train the apply specialist's learned fallback: (original region, sketch segment) -> final region.

Examples come from the training projects' commit histories only (``PROJECTS``; requests,
cobra and express are held out, and the commits ``benchmarks/apply.py --per-project
DEV_SKIP --seed 0`` draws from each training project are skipped so that its dev run is on
unseen commits). Each commit is sketched by both generators (``make_sketch``, every context
size and noise; ``sketch_styles``, every kind), each sketch is cut into regions
by ``regions.regions`` (the same cut the fallback uses), and each region's final text is the
label (``regions.region_target``). Only examples of at most ``n_positions`` tokens are kept.

The tokenizer and model follow the Tab LM's recipe (``specialists/tab/pretrain.py``: byte-level
BPE of 4,096 tokens trained here, a small GPT-2 trained from scratch on CPU within a time
budget, linear warm-up then cosine decay), with the prompt's tokens masked out of the loss.

    python -m specialists.apply.train_fallback --out runs/apply_fallback --minutes 25

Writes ``tokenizer.json``, ``config.json``, ``model.safetensors`` and ``train.json``.

Cutting the examples takes minutes of CPU; training wants a GPU where there is one. The two
can run apart: ``--write-examples FILE`` cuts and saves them (with the tokenizer's corpus and
the special tokens) and stops, and ``python specialists/lm_recipe.py --examples FILE
--device cuda ...`` trains the same model from that file alone on a machine that has torch,
transformers and tokenizers and nothing else of the project (``benchmarks/device_fallback.sh``
is that run, prepared).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from specialists.apply.regions import (END, SPECIAL_TOKENS, format_prompt, lines_of, region_target,
                                       regions)
from specialists.lm_recipe import RecipeArgs, add_arguments, from_arguments, save_examples, train_prompt_answer

__all__ = ["FallbackArgs", "PROJECTS", "examples", "train"]

PROJECTS = ("attrs", "click", "flask", "httpx", "rich")


@dataclass
class FallbackArgs(RecipeArgs):
    out: str = "runs/apply_fallback"
    """Folder the tokenizer, model and ``train.json`` are written to (``ApplySpecialist(fallback=...)``)."""
    data: str = "../shared/data/commits"
    """Directory of ``NAME.jsonl.gz`` commit histories."""
    projects: tuple[str, ...] = PROJECTS
    """Projects the examples come from (never the benchmark's held-out ones)."""
    dev_skip: int = 150
    """Skip the first N commits of each project after the benchmark's seed-0 shuffle."""
    n_positions: int = 512
    warmup_steps: int = 50
    eval_every: int = 100
    threads: int = 1
    max_commits: int = 0
    """Cap on commits per project (0: all); tests use a tiny one."""
    val_examples: int = 200
    """Examples held out of training for the validation loss."""
    write_examples: str = ""
    """Cut the examples, save them to this ``.jsonl.gz`` (``lm_recipe.save_examples``) and stop
    without training: train from it with ``python specialists/lm_recipe.py --examples FILE``."""


def _rows(path: Path, skip: int) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    random.Random(0).shuffle(rows)  # the benchmark's order at --seed 0
    return rows[skip:]


def _sketches(row: dict[str, Any], rng: random.Random) -> Iterator[str]:
    from specialists.apply.sketch import make_sketch

    before, after, language = row["before"], row["after"], row["language"]
    specs: list[tuple[Any, str | None]] = [(0, None), (1, None), (2, None), (3, None), ("function", None)]
    specs += [(rng.choice((1, 2)), n) for n in ("shift", "no_first_marker", "no_last_marker", "drop_blank")]
    for k, noise in specs:
        try:
            sk = make_sketch(before, after, language, k=k if k != "function" else 3,
                             whole_function=k == "function", deletions="mixed",
                             seed=rng.randrange(1 << 30), noise=noise)
        except Exception:  # noqa: BLE001 - a generator failing on one commit skips it
            continue
        if sk.changed:
            yield sk.text
    from specialists.apply.sketch_styles import make_frontier_sketch

    for kind in ("context", "context", "definition", "inner", "imports"):
        try:
            fs = make_frontier_sketch(before, after, language, rng, kind)
        except Exception:  # noqa: BLE001
            continue
        if fs.changed:
            yield fs.text


def examples(rows: list[dict[str, Any]], seed: int = 1) -> Iterator[tuple[str, str]]:
    """(prompt, answer) pairs: one per region of each sketch whose label is well defined."""
    import difflib

    seen: set[str] = set()
    for n, row in enumerate(rows):
        rng = random.Random(seed * 1_000_003 + n)
        before, after = row["before"], row["after"]
        ops = difflib.SequenceMatcher(None, lines_of(before), lines_of(after), autojunk=False).get_opcodes()
        olines = lines_of(before)
        for sketch in _sketches(row, rng):
            regs = regions(before, sketch, row["language"])
            if not regs:
                continue
            slines = lines_of(sketch)
            for region in regs:
                target = region_target(before, after, region, ops)
                if target is None:
                    continue
                prompt = format_prompt(region.original_text(olines), region.segment_text(slines))
                if prompt in seen:
                    continue
                seen.add(prompt)
                yield prompt, target[1] + END


def train(args: FallbackArgs) -> dict[str, Any]:
    """Cut the examples, train tokenizer and model; returns the figures in ``train.json``
    (with ``write_examples``: cut and save the examples only)."""
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    per_project: dict[str, int] = {}
    for name in args.projects:
        got = _rows(Path(args.data) / f"{name}.jsonl.gz", args.dev_skip)
        if args.max_commits:
            got = got[:args.max_commits]
        per_project[name] = len(got)
        rows += got
    cut = list(examples(rows, args.seed + 1))
    pairs = list(cut)
    random.Random(args.seed).shuffle(pairs)  # lm_recipe.main shuffles a saved file's pairs alike
    corpus = [row["after"] for row in rows] + [p + a for p, a in pairs[:2000]]
    prep_s = time.time() - t0
    if args.write_examples:
        save_examples(args.write_examples, cut, corpus, SPECIAL_TOKENS,
                      {"commits": per_project, "projects": list(args.projects), "dev_skip": args.dev_skip,
                       "seed": args.seed, "recipe": "specialists.apply.train_fallback"})
        return {"args": asdict(args), "commits": per_project, "prep_seconds": round(prep_s, 1),
                "examples": len(cut), "written": args.write_examples}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = train_prompt_answer(args, pairs, corpus, SPECIAL_TOKENS, out, args.val_examples)
    figures = {"args": asdict(args), "commits": per_project, "prep_seconds": round(prep_s, 1), **run}
    (out / "train.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, FallbackArgs)
    figures = train(from_arguments(FallbackArgs, parser.parse_args(argv)))
    print(json.dumps({k: v for k, v in figures.items() if k != "history"}))
    return figures


if __name__ == "__main__":
    main()
