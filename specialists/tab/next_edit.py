"""The next-edit model: the edit-replay format, as Zeta is trained (issue 15).

An example is one moment of a replayed edit (``hunks.hunks_of``: hunk by hunk, top to
bottom). The prompt shows the person's recent edits as diffs, a few lines above, and the
*editable region* around the cursor with the cursor marked; the answer is the region's next
state:

* while a hunk is being typed (``typing``): the region with that hunk finished;
* when a hunk is done (``done``): the region with the *next* hunk made, where that hunk lies
  wholly inside the region, else the region unchanged (the model must learn when nothing is
  next here as well as what is).

    <|edits|>@@ 120 @@\\n-old\\n+new\\n<|above|>...lines above...<|region|>...<|cursor|>...
    <|next|>the region's next state<|end|>

The model is the small GPT-2 of ``specialists.lm_recipe`` (byte-level BPE trained here with
these markers as special tokens, trained from scratch in a time budget, the prompt masked
out of the loss) and decodes speculatively from the region itself
(``specialists.lm_decode``): most of the answer is the region unchanged.

    python -m specialists.tab.next_edit --out runs/next_edit --minutes 20

trains on the training projects' histories only (``data.SPLIT["train"]``); the held-out
figures come from ``benchmarks/next_edit.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specialists.lm_recipe import RecipeArgs, add_arguments, from_arguments, train_prompt_answer
from specialists.tab.data import Pair, load_split
from specialists.tab.hunks import Hunk, hunks_of, trim
from specialists.tab.types import RecentEdit, Suggestion

__all__ = ["NextEditArgs", "NextEditExample", "NextEditModel", "SPECIAL_TOKENS", "examples", "format_prompt",
           "region_bounds", "repeat_latest", "train"]

EDITS, ABOVE, REGION, CURSOR, NEXT, END = ("<|edits|>", "<|above|>", "<|region|>", "<|cursor|>", "<|next|>",
                                           "<|end|>")
SPECIAL_TOKENS = (EDITS, ABOVE, REGION, CURSOR, NEXT, END)
ABOVE_LINES, BELOW_LINES, MAX_RECENT = 3, 6, 3
"""The editable region (lines above and below the cursor's) and the recent edits shown:
the same in training and serving."""


@dataclass(frozen=True)
class NextEditExample:
    prompt: str
    region: str
    """The editable region as it is (the draft the decoder starts from)."""
    target: str
    """The region's next state."""
    kind: str
    """``typing`` (finish the hunk being typed) or ``done`` (the next hunk, or nothing)."""
    language: str
    repo: str
    start: int
    """Offset of the region in the file as it is."""
    cursor: int
    """The cursor's offset in the region."""
    recent: tuple[RecentEdit, ...]
    """The recent edits the prompt shows, oldest first."""


def region_bounds(text: str, cursor: int, above: int, below: int) -> tuple[int, int]:
    """Offsets of the whole lines from ``above`` lines over the cursor's line to ``below`` lines
    under it."""
    line_start = text.rfind("\n", 0, cursor) + 1
    start = line_start
    for _ in range(above):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    end = text.find("\n", cursor)
    end = len(text) if end < 0 else end + 1
    for _ in range(below):
        if end >= len(text):
            break
        nxt = text.find("\n", end)
        end = len(text) if nxt < 0 else nxt + 1
    return start, end


def repeat_latest(ex: NextEditExample) -> str:
    """The latest edit repeated at its old text's next occurrence after the cursor in the
    region (rename propagation), else the region unchanged: the baseline the model is
    measured against (``benchmarks/next_edit.py``'s ``repeat``)."""
    if not ex.recent:
        return ex.region
    edit = ex.recent[-1]
    if not edit.old.strip() or edit.old == edit.new:
        return ex.region
    at = ex.region.find(edit.old, ex.cursor)
    return ex.region if at < 0 else ex.region[:at] + edit.new + ex.region[at + len(edit.old):]


def format_prompt(text: str, cursor: int, recent: Sequence[RecentEdit], start: int, end: int,
                  context_lines: int = 6, max_diff_lines: int = 12) -> str:
    """The prompt for the region ``[start, end)`` of ``text`` with the cursor at ``cursor``
    (inside it) and the latest ``recent`` edits, oldest first."""
    diffs = []
    for edit in recent:
        lines = edit.diff().splitlines(True)
        diffs.append("".join(lines[: max_diff_lines + 1]))
    above = text[:start].splitlines(True)[-context_lines:] if context_lines else []
    return (EDITS + "".join(diffs) + ABOVE + "".join(above) + REGION + text[start:cursor] + CURSOR
            + text[cursor:end] + NEXT)


def _apply(text: str, hunk: Hunk) -> str:
    return text[: hunk.start] + hunk.new + text[hunk.start + len(hunk.old):]


def examples(pair: Pair, above: int = ABOVE_LINES, below: int = BELOW_LINES, max_recent: int = MAX_RECENT,
             typing_per_hunk: int = 1,
             rng: random.Random | None = None) -> Iterator[NextEditExample]:
    """The edit-replay examples of one before/after pair (module docstring)."""
    rng = rng or random.Random(0)
    hunks = hunks_of(pair.before, pair.after)
    text = pair.before
    recent: list[RecentEdit] = []

    def make(state: str, cursor: int, target_state: str | None, hunk: Hunk | None, kind: str) -> NextEditExample:
        start, end = region_bounds(state, cursor, above, below)
        target = state[start:end]
        if hunk is not None and target_state is not None and start <= hunk.start and \
                hunk.start + len(hunk.old) <= end:
            target = target_state[start : end + len(hunk.new) - len(hunk.old)]
        shown = tuple(recent[-max_recent:])
        return NextEditExample(format_prompt(state, cursor, shown, start, end), state[start:end], target, kind,
                               pair.language, pair.repo, start, cursor - start, shown)

    for i, hunk in enumerate(hunks):
        if i > 0:  # the previous hunk is done, the cursor at its end: what is next here?
            prev = hunks[i - 1]
            yield make(text, prev.start + len(prev.new), _apply(text, hunk), hunk, "done")
        deleted = text[: hunk.start] + text[hunk.start + len(hunk.old):]
        if hunk.new and typing_per_hunk:
            cuts = sorted(rng.sample(range(len(hunk.new)), min(typing_per_hunk, len(hunk.new))))
            for k in cuts:
                state = deleted[: hunk.start] + hunk.new[:k] + deleted[hunk.start:]
                rest = Hunk(hunk.start + k, "", hunk.new[k:])
                yield make(state, hunk.start + k, _apply(state, rest), rest, "typing")
        text = _apply(text, hunk)
        recent.append(RecentEdit(old=hunk.old, new=hunk.new, offset=hunk.start))
    if hunks:  # the last hunk done: nothing is next
        last = hunks[-1]
        yield make(text, last.start + len(last.new), None, None, "done")


@dataclass
class NextEditArgs(RecipeArgs):
    out: str = "runs/next_edit"
    """Folder the tokenizer, model and ``train.json`` are written to (the ``next_edit`` option)."""
    data: str = "../shared/data/commits"
    """Directory of ``NAME.jsonl.gz`` commit histories."""
    split: str = "train"
    """Projects (a ``data.SPLIT`` name or comma-separated names) the examples come from."""
    per_project: int = 0
    """Pairs per project (0: all)."""
    n_positions: int = 512
    warmup_steps: int = 50
    eval_every: int = 100
    threads: int = 1
    val_examples: int = 200
    """Examples held out of training for the validation loss."""
    typing_per_hunk: int = 2
    """``typing`` examples cut from each hunk (the rest of the hunk is their answer)."""


def train(args: NextEditArgs) -> dict[str, Any]:
    """Cut the examples, train the tokenizer and the model; writes and returns ``train.json``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    pairs = load_split(args.data, args.split, args.per_project, seed=args.seed)
    rng = random.Random(args.seed)
    items = [(ex.prompt, ex.target + END) for p in pairs
             for ex in examples(p, typing_per_hunk=args.typing_per_hunk, rng=rng)]
    rng.shuffle(items)
    corpus = [p.after for p in pairs] + [a + b for a, b in items[:2000]]
    prep_s = time.time() - t0
    run = train_prompt_answer(args, items, corpus, SPECIAL_TOKENS, out, args.val_examples)
    figures = {"args": asdict(args), "projects": sorted({p.repo for p in pairs}), "pairs": len(pairs),
               "prep_seconds": round(prep_s, 1), **run}
    (out / "train.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures


class NextEditModel:
    """A trained next-edit model (``train``'s folder): the region's next state, decoded
    speculatively from the region."""

    def __init__(self, folder: str | Path, threads: int = 1) -> None:
        """Load ``folder``; ``FileNotFoundError`` saying how to train one where it holds none."""
        if not (Path(folder) / "tokenizer.json").is_file():
            raise FileNotFoundError(f"no next-edit model in {folder}: train one with "
                                    f"python -m specialists.tab.next_edit --out {folder}")
        import torch
        from tokenizers import Tokenizer
        from transformers import GPT2LMHeadModel

        torch.set_num_threads(threads)
        self.tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self.model = GPT2LMHeadModel.from_pretrained(str(folder), local_files_only=True).eval()
        end = self.tok.token_to_id(END)
        if end is None:
            raise ValueError(f"{folder}: its tokenizer has no {END} token; is it a next-edit model?")
        self.end: int = end
        self.limit = int(self.model.config.n_positions)

    def predict(self, prompt: str, region: str) -> tuple[str | None, Any]:
        """The region's next state, or None where the prompt and answer would not fit or the
        answer did not end; with the decode's cost (:class:`~specialists.lm_decode.DecodeStats`)."""
        from specialists.lm_decode import DecodeStats, speculative_decode

        ids = self.tok.encode(prompt).ids
        draft = self.tok.encode(region).ids + [self.end]
        budget = min(len(draft) * 2 + 16, self.limit - len(ids))
        if budget <= len(draft) // 2:
            return None, DecodeStats()
        out, stats = speculative_decode(self.model, ids, draft, budget, {self.end})
        if not out or out[-1] != self.end:
            return None, stats
        return self.tok.decode(out[:-1], skip_special_tokens=False), stats

    def suggest(self, req: Any) -> Suggestion | None:
        """The region's next state for a Tab request as a :class:`~specialists.tab.types.Suggestion`
        over only what changes, or None where the model changes nothing (or did not finish)."""
        start, end = region_bounds(req.file, req.cursor, ABOVE_LINES, BELOW_LINES)
        region = req.file[start:end]
        prompt = format_prompt(req.file, req.cursor, list(req.recent_edits)[-MAX_RECENT:], start, end)
        text, _ = self.predict(prompt, region)
        if text is None or text == region:
            return None
        lo, old, new = trim(region, text)
        hi = lo + len(old)
        if not old and start + lo != req.cursor:  # an insertion away from the cursor: show its line
            line_start = region.rfind("\n", 0, lo) + 1
            line_end = region.find("\n", lo)
            line_end = len(region) if line_end < 0 else line_end
            new = region[line_start:lo] + new + region[lo:line_end]
            lo, hi = line_start, line_end
        return Suggestion(start + lo, start + hi, new)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, NextEditArgs)
    figures = train(from_arguments(NextEditArgs, parser.parse_args(argv)))
    print(json.dumps({k: v for k, v in figures.items() if k != "history"}))
    return figures


if __name__ == "__main__":
    main()
