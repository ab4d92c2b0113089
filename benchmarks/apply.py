"""Sketch-to-diff applier benchmark on lazy sketches made from real commits.

For every before/after pair in DATA (``*.jsonl.gz`` commit histories: files, or folders of
them; default ``shared/data/commits``), write lazy sketches with two independent generators
(``--generator``, default both):

* ``lines``: ``specialists.apply.make_sketch``, the house style: k = 0, 1, 2, 3 context
  lines and the whole enclosing definition (deletions drawn between context and a ``remove``
  comment), plus noisy variants of a k = 1 or 2 sketch (uniform indentation shift, first or
  last marker missing, a blank context line dropped);
* ``frontier``: ``specialists/apply/sketch_styles.py``, what frontier models write when told to be
  lazy: many marker spellings, no leading (trailing) marker when the edit starts (ends) the
  file, deletions by omission or by a ``remove`` comment, whole definitions, class rewrites
  with markers inside bodies, new imports with no context, trailing whitespace, markers at
  another indentation;
* ``reworded``: the frontier sketches with their marker and ``remove`` comments written again
  in wordings no other generator uses (``reword_sketch``; for developing the marker reading,
  never part of ``both`` or ``all``);
* ``outline`` (also ``third``): ``make_outline_sketch`` in the same module, a third style
  written for issue 36 and kept out of the applier's tuning: one line of context above a
  change (below only to close a deletion), a definition's header alone, sibling definitions
  as an outline with elided bodies, blank lines next to markers left out, its own marker
  wordings and after-the-fact deletion notes.

``--generator both`` is ``lines`` and ``frontier`` (the two the applier was developed on);
``all`` adds ``outline``.

The expected answer is always the committed file.

Run in the same process, on the same sketches:
* the applier (``apply_sketch``, defaults: parse check on; ``--tie-rewrite`` and
  ``--tie-file-end`` turn on its two tie readings, off by default);
* a plain line-anchor baseline: each block replaces the original lines from the first
  occurrence of its first line (after the previous block) to the first occurrence of its
  last line after that.

Reports, per generator and side by side: exact match (byte for byte and
whitespace-normalised) on unique and ambiguous sketches, correct-or-abstain on ambiguous
ones, silent wrong answers, per language, per sketch kind and per context size; unchanged
lines deleted, throughput in characters/s and tokens/s (tiktoken ``cl100k_base`` over the
expected file; overall and for files up to 1,500 lines) and its ratio to the baseline's,
latency p50/p95 by file size, and what a frontier model would spend writing the whole file
instead of the sketch (output tokens, and USD from litellm's local cost map). Last line:
JSON summary.

    python benchmarks/apply.py DATA... [--generator both] [--per-project 400] [--seed 0]
                               [--tie-rewrite] [--tie-file-end]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specialists.apply.sketch_styles import (EDIT_FORMATS, OUTLINE_KINDS, chat_answer,  # noqa: E402
                                             make_frontier_sketch, make_outline_sketch,
                                             edit_answer, numbered_sketch, reword_sketch,
                                             split_answer)
from specialists.apply import apply_sketch, make_sketch  # noqa: E402
from specialists.apply.applier import warm  # noqa: E402
from specialists.apply.edits import read_edit  # noqa: E402
from specialists.apply.result import Abstain, ApplyOptions, ApplyResult  # noqa: E402
from specialists.apply.scorer import default_scorer  # noqa: E402
from specialists.apply.markers import LineKind, classify  # noqa: E402

MORPH_TOKENS_PER_S = 10_500
FRONTIER_MODELS = ("gpt-4o", "claude-3-5-sonnet-20241022", "gpt-4.1")
TARGET_LINES = 1500  # the throughput target holds for files up to this many lines
SIZE_BUCKETS = ((0, 200), (200, 500), (500, 1000), (1000, 1_000_000))


@dataclass
class Case:
    project: str
    before: str
    after: str
    language: str
    path: str
    sketch: str
    label: str
    k: str
    noise: str
    generator: str = "lines"
    kind: str = "context"
    # the same generator with the same draws, on another ``after``: (before, after) -> sketch
    # text (``apply_ceiling.py`` asks which other commits give this very sketch)
    remake: Callable[[str, str], str] | None = field(default=None, repr=False, compare=False)


GENERATORS = ("lines", "frontier")
ALL_GENERATORS = ("lines", "frontier", "outline")
FRONTIER_KINDS = ("context", "context", "definition", "inner", "imports")


def history_files(data: list[Path]) -> list[Path]:
    """The ``*.jsonl.gz`` histories named, or found in the folders named."""
    files: list[Path] = []
    for item in data:
        files += sorted(item.glob("*.jsonl.gz")) if item.is_dir() else [item]
    return files


def load(data: list[Path], per_project: int, seed: int) -> Iterator[dict[str, Any]]:
    for file in history_files(data):
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        random.Random(seed).shuffle(rows)
        for row in rows[:per_project]:
            row.setdefault("repo", file.name.split(".")[0])
            yield row


def cases(rows: Iterator[dict[str, Any]], seed: int,
          generators: tuple[str, ...] = GENERATORS) -> Iterator[Case]:
    for n, row in enumerate(rows):
        common = dict(project=row["repo"], before=row["before"], after=row["after"],
                      language=row["language"], path=row["path"])
        if "lines" in generators:
            yield from _lines_cases(row, common, random.Random(seed * 1_000_003 + n))
        if "frontier" in generators:
            rng = random.Random(seed * 1_000_033 + n + 7)
            for kind in FRONTIER_KINDS:
                state = rng.getstate()
                sk = make_frontier_sketch(row["before"], row["after"], row["language"], rng, kind)
                if sk.changed:
                    yield Case(sketch=sk.text, label=sk.label, k=sk.context, noise=sk.noise,
                               generator="frontier", kind=f"{sk.kind}/{sk.deletions}",
                               remake=_again(make_frontier_sketch, state, row["language"], kind),
                               **common)
        if "reworded" in generators:
            rng = random.Random(seed * 1_000_033 + n + 7)
            reword = random.Random(seed * 1_000_039 + n + 13)
            for kind in FRONTIER_KINDS:
                sk = make_frontier_sketch(row["before"], row["after"], row["language"], rng, kind)
                if sk.changed:
                    text, reworded = reword_sketch(sk.text, row["language"], reword)
                    if reworded:
                        yield Case(sketch=text, label=sk.label, k=sk.context, noise=sk.noise,
                                   generator="reworded", kind=f"{sk.kind}/{sk.deletions}",
                                   **common)
        if "outline" in generators:
            rng = random.Random(seed * 1_000_037 + n + 11)
            for kind in OUTLINE_KINDS:
                state = rng.getstate()
                osk = make_outline_sketch(row["before"], row["after"], row["language"], rng, kind)
                if osk.changed:
                    yield Case(sketch=osk.text, label=osk.label, k=osk.kind, noise=osk.noise,
                               generator="outline", kind=f"{osk.kind}/{osk.deletions}",
                               remake=_again(make_outline_sketch, state, row["language"], kind),
                               **common)


def _again(make: Callable[..., Any], state: Any, language: str,
           kind: str) -> Callable[[str, str], str]:
    """``make`` (a generator drawing from one shared ``random.Random``) again from the draw
    state it started at, on any before/after pair."""
    def remake(before: str, after: str) -> str:
        rng = random.Random()
        rng.setstate(state)
        return make(before, after, language, rng, kind).text
    return remake


def edit_cases(source: Iterable[Case], formats: tuple[str, ...],
               rng: random.Random) -> Iterator[Case]:
    """Each commit of ``source`` once per format, written in that edit format."""
    seen: set[int] = set()
    for case in source:
        key = hash((case.path, case.before, case.after))
        if key in seen:
            continue
        seen.add(key)
        for fmt in formats:
            text, label = edit_answer(case.before, case.after, fmt, rng, case.path, case.language)
            yield replace(case, sketch=text, label=label, generator=fmt, k="-", noise="none",
                          kind=fmt)


def generator_names(choice: str) -> tuple[str, ...]:
    """The generators ``--generator`` names: ``both`` the two the applier was developed on,
    ``all`` those and the third, ``third`` the third (``outline``)."""
    return {"both": GENERATORS, "all": ALL_GENERATORS, "third": ("outline",)}.get(
        choice, (choice,))


def _lines_cases(row: dict[str, Any], common: dict[str, Any], rng: random.Random) -> Iterator[Case]:
    specs: list[tuple[Any, str | None]] = [(0, None), (1, None), (2, None), (3, None),
                                           ("function", None)]
    specs += [(rng.choice((2, 3) if noise == "drop_blank" else (1, 2)), noise) for noise in
              ("shift", "no_first_marker", "no_last_marker", "drop_blank")]
    for k, noise in specs:
        draw = dict(k=k if k != "function" else 3, whole_function=k == "function",
                    deletions="mixed", seed=rng.randrange(1 << 30), noise=noise)
        sk = make_sketch(row["before"], row["after"], row["language"], **draw)
        if noise and not sk.changed:
            continue
        yield Case(sketch=sk.text, label=sk.label, k=str(sk.k), noise=noise or "none",
                   generator="lines", kind="function" if k == "function" else "context",
                   remake=lambda b, a, lang=row["language"], d=draw: make_sketch(
                       b, a, lang, **d).text,
                   **common)


# ---- plain line-anchor baseline -----------------------------------------------------------

def first_place_apply(original: str, answer: str, path: str) -> str | None:
    """The baseline for ``--edit-format``: each block's lines to find, taken exactly, replaced
    at their first place in the file as it stands after the blocks before (aider's first
    rule; ``None`` where a block's lines are not in it). The blocks are the applier's own
    reading of the answer, so the two differ only in where they put them."""
    try:
        edit = read_edit(answer, original, path)
    except Abstain:
        return None
    if edit is None:
        return None
    text = original
    for block in edit.blocks:
        find = "".join(line + "\n" for line in block.find)
        at = text.find(find) if find else -1
        while at > 0 and text[at - 1] != "\n":  # a whole line, not the end of one
            at = text.find(find, at + 1)
        if at < 0:
            return None
        text = text[:at] + "".join(line + "\n" for line in block.put) + text[at + len(find):]
    return text


def baseline_apply(original: str, sketch: str) -> str | None:
    """Each block replaces [first occurrence of its first line, first occurrence of its last
    line after that] in the original, searching after the previous block. ``None`` when a
    block's first or last line is not found."""
    olines = original.split("\n")
    okeys = [line.strip() for line in olines]
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in sketch.rstrip("\n").split("\n"):
        if classify(line.strip())[0] != LineKind.CODE:
            if current:
                blocks.append(current)
            current = []
        else:
            current.append(line)
    if current:
        blocks.append(current)
    out: list[str] = []
    cursor = 0
    for block in blocks:
        keys = [line.strip() for line in block if line.strip()]
        if not keys:
            continue
        try:
            start = okeys.index(keys[0], cursor)
            end = okeys.index(keys[-1], start)
        except ValueError:
            return None
        out.extend(olines[cursor:start])
        out.extend(block)
        cursor = end + 1
    out.extend(olines[cursor:])
    return "\n".join(out)


# ---- scoring ------------------------------------------------------------------------------

_WS = re.compile(r"\s+")


def normalise(text: str) -> list[str]:
    return [_WS.sub(" ", line).strip() for line in text.split("\n") if line.strip()]


def deleted_unchanged(before: str, after: str, merged: str) -> int:
    """Lines kept by the commit (in before and after) that the merge lost."""
    kept = Counter(before.split("\n")) & Counter(after.split("\n"))
    lost = kept - Counter(merged.split("\n"))
    return sum(count for line, count in lost.items() if line.strip())


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def tokenizer() -> Any:
    """tiktoken's cl100k_base, from the copy litellm ships (no download)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        import importlib.util

        spec = importlib.util.find_spec("litellm")
        if spec and spec.origin:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(
                Path(spec.origin).parent / "litellm_core_utils" / "tokenizers")
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def frontier_costs(tokens_full: int, tokens_sketch: int) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    out: dict[str, Any] = {}
    for model in FRONTIER_MODELS:
        info = litellm.model_cost.get(model)
        if not info or not info.get("output_cost_per_token"):
            continue
        price = info["output_cost_per_token"]
        out[model] = {"usd_whole_file": round(tokens_full * price, 4),
                      "usd_sketch": round(tokens_sketch * price, 4)}
    return out


def speculative_speedup(runs: int, tokens: int, seed: int) -> dict[str, Any]:
    """Speculative edits vs plain greedy on the same tiny random GPT-2 (2 layers, CPU).

    No trained apply model is available offline, so the draft stands in for "the original
    file": the model's own greedy output with 1-4 small edits (replaced, inserted or deleted
    runs of tokens), as a merged file differs from the original in its edited lines only.
    Both decoders are checked to give the same tokens.
    """
    import torch
    import transformers

    from specialists.apply.model import greedy_decode, speculative_decode

    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=256, n_positions=2048, n_embd=64, n_layer=2, n_head=2,
                                     initializer_range=0.5, bos_token_id=0, eos_token_id=1)
    model = transformers.GPT2LMHeadModel(config).eval()
    rng = random.Random(seed)
    g_time = s_time = 0.0
    g_pass = s_pass = 0
    equal = True
    for _ in range(runs):
        prompt = [rng.randrange(256) for _ in range(200)]
        greedy, g = greedy_decode(model, prompt, tokens)
        draft = list(greedy)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(draft))
            draft[at:at + rng.randint(0, 5)] = [rng.randrange(256) for _ in range(rng.randint(0, 5))]
        spec, sp = speculative_decode(model, prompt, draft, tokens)
        equal &= spec == greedy
        g_time, s_time = g_time + g.seconds, s_time + sp.seconds
        g_pass, s_pass = g_pass + g.forward_passes, s_pass + sp.forward_passes
    return {"runs": runs, "tokens_each": tokens, "outputs_equal": equal,
            "greedy_tokens_per_s": round(runs * tokens / g_time, 1),
            "speculative_tokens_per_s": round(runs * tokens / s_time, 1),
            "speedup_wall": round(g_time / s_time, 2), "forward_passes_greedy": g_pass,
            "forward_passes_speculative": s_pass}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="*", type=Path,
                        default=[ROOT.parent / "shared" / "data" / "commits"],
                        help="*.jsonl.gz commit histories, or folders of them")
    parser.add_argument("--generator", default="both",
                        choices=("lines", "frontier", "reworded", "outline", "third", "both",
                                 "all"),
                        help="both: lines and frontier; all: and outline (third: outline); "
                             "reworded: the frontier sketches with fresh marker and deletion "
                             "wordings (development only)")
    parser.add_argument("--chat-wrap", action="store_true",
                        help="send each sketch as a chat answer: in a Markdown fence, a "
                             "comment naming the file on top one time in four, a sentence "
                             "above or below, CRLF one time in three (chat_answer)")
    parser.add_argument("--chat-split", action="store_true",
                        help="send each sketch as a chat answer that shows it in two fences, "
                             "split at a marker, with prose and a shell block between "
                             "(split_answer)")
    parser.add_argument("--line-numbers", action="store_true",
                        help="write each sketch's lines with the numbers of a numbered view of "
                             "the original (cat -n and four other forms; numbered_sketch)")
    parser.add_argument("--edit-format", default=None,
                        choices=(*EDIT_FORMATS, "all"),
                        help="send each commit once as an edit in another format instead of a "
                             "lazy sketch: SEARCH/REPLACE blocks, a unified diff (line numbers "
                             "right, off or left out) or an apply_patch envelope; all: one of "
                             "each per commit (edit_answer). The commits are --generator's")
    parser.add_argument("--per-project", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--failures", type=Path, default=None,
                        help="write each wrong or abstained case here (JSON lines)")
    parser.add_argument("--speculative", type=int, default=0, metavar="RUNS",
                        help="also time speculative edits vs greedy on a tiny model, RUNS decodes")
    parser.add_argument("--tie-rewrite", action="store_true",
                        help="issue 36: a block that ties between two places goes where its "
                             "new lines rewrite old lines like them (ApplyOptions.tie_rewrite, "
                             "off by default)")
    parser.add_argument("--tie-file-end", action="store_true",
                        help="issue 36: a tied last block with no marker after it closes the "
                             "file (ApplyOptions.tie_file_end, off by default)")
    parser.add_argument("--reading-search", action="store_true",
                        help="issue 36: the reading search and learned scorer "
                             "(ApplyOptions.reading_search); also prints its risk-coverage curve")
    parser.add_argument("--threshold", type=float, default=None,
                        help="the scorer's threshold (default: the one shipped with its weights)")
    parser.add_argument("--rules-threshold", type=float, default=None,
                        help="the scorer's threshold for the rules' own answers (default: shipped)")
    parser.add_argument("--curve-png", type=Path, default=None,
                        help="with --reading-search: draw the risk-coverage curve here")
    parser.add_argument("--fallback", type=Path, default=None, metavar="DIR",
                        help="run the learned fallback (train_fallback's DIR) on every abstain")
    args = parser.parse_args(argv)
    meter = None
    if args.fallback:
        from benchmarks.apply_fallback import FallbackMeter

        meter = FallbackMeter(args.fallback)

    options = ApplyOptions(reading_search=args.reading_search, scorer_threshold=0.0,
                           tie_rewrite=args.tie_rewrite, tie_file_end=args.tie_file_end)
    threshold = args.threshold
    if args.reading_search and threshold is None:
        threshold = default_scorer().threshold
    rules_threshold = args.rules_threshold
    if args.reading_search and rules_threshold is None:
        rules_threshold = default_scorer().rules_threshold
    curve_points: list[tuple[str, float, bool, bool, bool]] = []
    enc = tokenizer()
    warm()  # the applier's compiled kernels, loaded once as a server does (not timed)
    token_cache: dict[int, int] = {}
    stats: dict[str, Counter[str]] = defaultdict(Counter)
    apply_seconds = baseline_seconds = 0.0
    total_tokens = total_chars = 0
    small_seconds, small_tokens = 0.0, 0  # files up to TARGET_LINES lines (the target)
    latency: dict[str, list[float]] = defaultdict(list)
    tokens_full = tokens_sketch = 0
    seen_commits: set[int] = set()
    failures = args.failures.open("w") if args.failures else None

    generators = generator_names(args.generator)
    wrap = random.Random(args.seed * 1_000_041 + 17)
    source = cases(load(args.data, args.per_project, args.seed), args.seed, generators)
    if args.edit_format:
        formats = EDIT_FORMATS if args.edit_format == "all" else (args.edit_format,)
        source = edit_cases(source, formats, wrap)
        generators = formats
    for case in source:
        if args.line_numbers:
            case.sketch = numbered_sketch(case.sketch, case.before, wrap)
        if args.chat_wrap:
            case.sketch = chat_answer(case.sketch, case.language, wrap, case.path)
        if args.chat_split:
            case.sketch = split_answer(case.sketch, case.language, wrap)
        key = id(case.after)
        if key not in token_cache:
            token_cache = {key: len(enc.encode(case.after, disallowed_special=()))}
        tokens = token_cache[key]
        if (case.generator == "lines" and case.k == "1" and case.noise == "none"
                and hash(case.after) not in seen_commits):
            seen_commits.add(hash(case.after))
            tokens_full += tokens
            tokens_sketch += len(enc.encode(case.sketch, disallowed_special=()))

        started = time.perf_counter()
        result = apply_sketch(case.before, case.sketch, language=case.language, path=case.path,
                              options=options)
        elapsed = time.perf_counter() - started
        if options.reading_search:
            # run at threshold 0 (the search and the score cost the same at any threshold):
            # the shipped threshold's answers are those whose probability reaches it
            p = result.stats.get("scorer_probability")
            if p is not None:
                from_rules = result.stats.get("rules_status") == "applied"
                curve_points.append((case.generator, p, result.applied and result.merged == case.after,
                                     result.applied and normalise(result.merged or "") == normalise(case.after),
                                     from_rules))
                if result.applied and p < (rules_threshold if from_rules else threshold):
                    result = ApplyResult("abstained", reason="scorer below threshold",
                                         path=case.path, confidence=p)
        started = time.perf_counter()
        base = (first_place_apply(case.before, case.sketch, case.path) if args.edit_format
                else baseline_apply(case.before, case.sketch))
        baseline_seconds += time.perf_counter() - started

        apply_seconds += elapsed
        total_tokens += tokens
        total_chars += len(case.after)
        n_lines = case.before.count("\n")
        if n_lines <= TARGET_LINES:
            small_seconds += elapsed
            small_tokens += tokens
        bucket = next(f"{lo}-{hi if hi < 1_000_000 else 'max'}" for lo, hi in SIZE_BUCKETS if lo <= n_lines < hi)
        latency[bucket].append(elapsed)

        exact = result.applied and result.merged == case.after
        exact_ws = result.applied and normalise(result.merged or "") == normalise(case.after)
        base_exact = base is not None and base == case.after
        g = case.generator
        groups = ("all", f"label={case.label}", f"k={case.k}", f"noise={case.noise}",
                  f"{case.label}/k={case.k}", f"lang={case.language}", f"{g}:all",
                  f"{g}:label={case.label}", f"{g}:lang={case.language}", f"{g}:kind={case.kind}",
                  f"{g}:context={case.k}", f"{g}:noise={case.noise}",
                  f"{g}:lang={case.language}/{case.label}", f"{g}:project={case.project}")
        for group in groups:
            s = stats[group]
            s["n"] += 1
            s["exact"] += exact
            s["exact_ws"] += exact_ws
            s["abstained"] += not result.applied
            s["silent_wrong"] += result.applied and not exact_ws
            s["silent_wrong_bytes"] += result.applied and not exact
            s["baseline_exact"] += base_exact
            s["baseline_wrong"] += base is not None and normalise(base) != normalise(case.after)
            if result.applied and not exact:
                s["deleted_unchanged"] += deleted_unchanged(case.before, case.after, result.merged or "")
        if meter is not None:
            meter.observe(case, result, tokens)
        if failures and not exact:
            failures.write(json.dumps({
                "project": case.project, "path": case.path, "label": case.label, "k": case.k,
                "generator": case.generator, "kind": case.kind, "language": case.language,
                "noise": case.noise, "status": result.status, "reason": result.reason,
                "span": result.span, "exact_ws": exact_ws, "sketch": case.sketch,
                "before": case.before, "after": case.after, "merged": result.merged,
            }) + "\n")
    if failures:
        failures.close()

    def rate(group: str, field: str) -> float:
        s = stats[group]
        return round(s[field] / s["n"], 4) if s["n"] else 0.0

    breakdown = {
        group: {"n": s["n"], "exact": rate(group, "exact"), "exact_ws": rate(group, "exact_ws"),
                "abstain": rate(group, "abstained"),
                "correct_or_abstain": round((s["exact"] + s["abstained"]) / s["n"], 4),
                "silent_wrong": rate(group, "silent_wrong"), "baseline_exact": rate(group, "baseline_exact"),
                "deleted_unchanged_lines": s["deleted_unchanged"]}
        for group, s in sorted(stats.items())
    }
    for group, row in breakdown.items():
        print(f"{group:28s} " + " ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr)
    u, a = stats["label=unique"], stats["label=ambiguous"]
    tokens_per_s = total_tokens / apply_seconds if apply_seconds else 0.0
    summary = {
        "n_sketches": stats["all"]["n"],
        "n_unique": u["n"],
        "n_ambiguous": a["n"],
        "exact_unique": rate("label=unique", "exact"),
        "exact_ambiguous": rate("label=ambiguous", "exact"),
        "exact_ws_unique": rate("label=unique", "exact_ws"),
        "exact_ws_ambiguous": rate("label=ambiguous", "exact_ws"),
        "abstain_rate_unique": rate("label=unique", "abstained"),
        "abstain_rate_ambiguous": rate("label=ambiguous", "abstained"),
        "correct_or_abstain_ambiguous": round((a["exact"] + a["abstained"]) / a["n"], 4) if a["n"] else 0.0,
        "silent_wrong_rate": rate("all", "silent_wrong"),
        "silent_wrong_rate_bytes": rate("all", "silent_wrong_bytes"),
        "deleted_unchanged_lines": stats["all"]["deleted_unchanged"],
        "tokens_per_s": round(tokens_per_s),
        "chars_per_s": round(total_chars / apply_seconds) if apply_seconds else 0,
        "speedup_vs_morph_10500": round(tokens_per_s / MORPH_TOKENS_PER_S, 1),
        f"tokens_per_s_upto_{TARGET_LINES}_lines": round(small_tokens / small_seconds) if small_seconds else 0,
        f"speedup_vs_morph_upto_{TARGET_LINES}_lines": round(
            small_tokens / small_seconds / MORPH_TOKENS_PER_S, 1) if small_seconds else 0.0,
        "baseline_exact_unique": rate("label=unique", "baseline_exact"),
        "baseline_exact_ambiguous": rate("label=ambiguous", "baseline_exact"),
        "baseline_tokens_per_s": round(total_tokens / baseline_seconds) if baseline_seconds else 0,
        "latency_ms": {b: {"n": len(v), "p50": round(percentile(v, 0.5) * 1e3, 3),
                           "p95": round(percentile(v, 0.95) * 1e3, 3)} for b, v in sorted(latency.items())},
        "per_k": {g.split("=", 1)[1]: breakdown[g] for g in breakdown if g.startswith("k=")},
        "per_noise": {g.split("=", 1)[1]: breakdown[g] for g in breakdown if g.startswith("noise=")},
        "per_label_k": {g: breakdown[g] for g in breakdown if "/k=" in g},
        "frontier_rewrite": {
            "commits": len(seen_commits), "tokens_whole_file": tokens_full,
            "tokens_sketch_k1": tokens_sketch,
            "ratio": round(tokens_full / tokens_sketch, 2) if tokens_sketch else None,
            "cost": frontier_costs(tokens_full, tokens_sketch),
        },
        "tokenizer": "tiktoken cl100k_base (expected file)",
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
    }
    if args.speculative:
        summary["speculative_edits"] = speculative_speedup(args.speculative, 400, args.seed)
    summary["baseline_ratio"] = round(tokens_per_s / summary["baseline_tokens_per_s"], 4) \
        if summary["baseline_tokens_per_s"] else 0.0
    summary["by_generator"] = {g: generator_summary(g, stats) for g in generators}
    print_side_by_side(summary["by_generator"])
    if args.reading_search:
        summary["reading_search"] = {
            "threshold": threshold, "rules_threshold": rules_threshold,
            "risk_coverage": risk_coverage(curve_points, generators, rules_threshold),
            "risk_coverage_one_threshold": risk_coverage(curve_points, generators, None)}
        print_risk_coverage(summary["reading_search"]["risk_coverage"], threshold)
        print("one threshold for every answer, the rules' too:", file=sys.stderr)
        print_risk_coverage(summary["reading_search"]["risk_coverage_one_threshold"], threshold)
        if args.curve_png:
            draw_risk_coverage(summary["reading_search"]["risk_coverage"], threshold, args.curve_png)
    if meter is not None:
        summary["fallback"] = meter.summary(tokens_per_s)
        meter.print_table(summary["fallback"])
    print(json.dumps(summary))
    return summary


CURVE_THRESHOLDS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995)


def risk_coverage(points: list[tuple[str, float, bool, bool, bool]], generators: tuple[str, ...],
                  rules_threshold: float | None) -> dict[str, list[dict[str, float]]]:
    """Per generator, at each threshold for searched readings: exact, abstain and
    silent-wrong rates over the sketches the search scored (``points``: generator,
    probability, exact, exact up to whitespace, the rules' own answer). The rules' answers
    stand at ``rules_threshold``, or at the same threshold when it is ``None``."""
    out: dict[str, list[dict[str, float]]] = {}
    for g in generators:
        rows = [pt for pt in points if pt[0] == g]
        n = max(len(rows), 1)
        out[g] = []
        for t in CURVE_THRESHOLDS:
            answered = [pt for pt in rows if pt[1] > 0 and pt[1] >= (
                rules_threshold if pt[4] and rules_threshold is not None else t)]
            out[g].append({"threshold": t, "n": len(rows),
                           "exact": round(sum(pt[2] for pt in answered) / n, 4),
                           "abstain": round(1 - len(answered) / n, 4),
                           "silent_wrong": round(sum(not pt[3] for pt in answered) / n, 4)})
    return out


def print_risk_coverage(curve: dict[str, list[dict[str, float]]], threshold: float) -> None:
    print(f"\nrisk-coverage (shipped threshold {threshold}): threshold  "
          + "  ".join(f"{g}: exact/abstain/silent_wrong" for g in curve), file=sys.stderr)
    for i, t in enumerate(CURVE_THRESHOLDS):
        cells = [f"{c[i]['exact']}/{c[i]['abstain']}/{c[i]['silent_wrong']}" for c in curve.values()]
        print(f"  {t:<6}" + "".join(f"{cell:>28s}" for cell in cells), file=sys.stderr)


def draw_risk_coverage(curve: dict[str, list[dict[str, float]]], threshold: float,
                       path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for g, rows in curve.items():
        ax.plot([r["abstain"] for r in rows], [100 * r["silent_wrong"] for r in rows], "o-",
                label=g, markersize=3)
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("abstain rate")
    ax.set_ylabel("silent wrong (% of sketches)")
    ax.set_title(f"reading search + learned score (shipped threshold {threshold})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _scores(s: Counter[str], u: Counter[str] | None = None,
            a: Counter[str] | None = None) -> dict[str, Any]:
    """The issue's keys for one group of sketches (``u``/``a``: its unique and ambiguous
    parts, when the group mixes labels)."""
    def ratio(x: int, n: int) -> float | None:
        return round(x / n, 4) if n else None

    out: dict[str, Any] = {"n": s["n"]}
    if u is not None and a is not None:
        out.update(n_unique=u["n"], n_ambiguous=a["n"],
                   exact_unique=ratio(u["exact"], u["n"]),
                   exact_ambiguous=ratio(a["exact"], a["n"]),
                   correct_or_abstain_ambiguous=ratio(a["exact"] + a["abstained"], a["n"]))
    out.update(exact=ratio(s["exact"], s["n"]), exact_ws=ratio(s["exact_ws"], s["n"]),
               abstain=ratio(s["abstained"], s["n"]),
               silent_wrong=ratio(s["silent_wrong"], s["n"]),
               silent_wrong_bytes=ratio(s["silent_wrong_bytes"], s["n"]),
               baseline_exact=ratio(s["baseline_exact"], s["n"]),
               baseline_silent_wrong=ratio(s["baseline_wrong"], s["n"]))
    return out


def generator_summary(g: str, stats: dict[str, Counter[str]]) -> dict[str, Any]:
    """exact_unique, exact_ambiguous, correct_or_abstain_ambiguous and silent_wrong for one
    generator's sketches, overall and per language, sketch kind, context size and project."""
    out = _scores(stats[f"{g}:all"], stats[f"{g}:label=unique"], stats[f"{g}:label=ambiguous"])
    for field in ("lang", "project"):
        names = sorted({key.split("=", 1)[1].split("/")[0] for key in stats
                        if key.startswith(f"{g}:{field}=")})
        out[f"per_{field}"] = {
            name: _scores(stats[f"{g}:{field}={name}"], stats[f"{g}:{field}={name}/unique"],
                          stats[f"{g}:{field}={name}/ambiguous"]) if field == "lang"
            else _scores(stats[f"{g}:{field}={name}"]) for name in names}
    for field in ("kind", "context", "noise"):
        out[f"per_{field}"] = {key.split("=", 1)[1]: _scores(s) for key, s in sorted(stats.items())
                               if key.startswith(f"{g}:{field}=")}
    return out


def print_side_by_side(by_generator: dict[str, dict[str, Any]]) -> None:
    keys = ("n", "exact_unique", "exact_ambiguous", "correct_or_abstain_ambiguous", "silent_wrong",
            "silent_wrong_bytes", "abstain", "baseline_exact", "baseline_silent_wrong")
    names = list(by_generator)
    print("\n" + f"{'':32s}" + "".join(f"{n:>12s}" for n in names), file=sys.stderr)
    for key in keys:
        print(f"{key:32s}" + "".join(f"{str(by_generator[n].get(key)):>12s}" for n in names),
              file=sys.stderr)
    for field in ("per_lang", "per_kind", "per_context"):
        rows = sorted({row for n in names for row in by_generator[n][field]})
        for row in rows:
            cells = []
            for n in names:
                r = by_generator[n][field].get(row)
                cells.append("-" if r is None
                             else f"{r['exact']}/{r['abstain']}/{r['silent_wrong']}")
            print(f"{field[4:]}={row:27s}" + "".join(f"{c:>24s}" for c in cells), file=sys.stderr)
    print("(per row: exact / abstain / silent wrong)", file=sys.stderr)


if __name__ == "__main__":
    main()
