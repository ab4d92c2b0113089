"""The learned fallback: when the rules abstain, a small model rewrites the sketch's regions.

``RegionFallback.apply(original, sketch, ...)`` cuts the sketch into regions
(``regions.regions``: each block's window of the original, joined where they touch), has the
model write each region's final text from (region of the original, sketch segment), decoded
speculatively with the region's original text as the draft (``model.speculative_decode``),
splices the answers into the file, and accepts the file only if

* every region's answer ended (the end token within the budget), uses only lines of its
  region or segment, keeps every code line the segment shows in the segment's order, and
  keeps the region's other lines in their order;
* the spliced file passes the rules' own checks: it is merged as a marker-free sketch by
  ``apply_sketch`` (placeholders, duplicated or redefined code, deletions over the share
  allowed, parse check) and must come back unchanged.

Otherwise it abstains. The model is one ``train_fallback`` wrote (``tokenizer.json``, a GPT-2
``config.json`` and weights); torch and transformers load only when it is built.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from specialists.apply.applier import apply_sketch
from specialists.apply.markers import LineKind, classify
from specialists.apply.model import speculative_decode
from specialists.apply.regions import END, Region, format_prompt, lines_of, regions, splice
from specialists.apply.result import ApplyOptions, ApplyResult

__all__ = ["RegionFallback", "checked_region_merge"]


class RegionFallback:
    """Region-by-region model rewrite of an abstained sketch, kept only when the checks pass."""

    def __init__(self, model: Any, tokenizer: Any, *, draft_len: int = 16) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.draft_len = draft_len
        self.end_id = int(tokenizer.token_to_id(END))
        self.n_positions = int(model.config.n_positions)

    @classmethod
    def load(cls, path: str | Path, *, threads: int | None = None, **options: Any) -> "RegionFallback":
        import torch
        from tokenizers import Tokenizer
        from transformers import GPT2LMHeadModel

        if threads:
            torch.set_num_threads(threads)
        model: Any = GPT2LMHeadModel.from_pretrained(str(path), local_files_only=True)
        model = model.eval()
        return cls(model, Tokenizer.from_file(str(Path(path) / "tokenizer.json")), **options)

    def rewrite_region(self, region_text: str, segment: str) -> tuple[str | None, dict[str, Any]]:
        """The model's final text for one region (None when it does not end in the budget)."""
        prompt = self.tokenizer.encode(format_prompt(region_text, segment)).ids
        draft = self.tokenizer.encode(region_text).ids + [self.end_id]
        room = self.n_positions - len(prompt)
        budget = min(room, len(draft) + 64)
        if budget < len(draft) // 2 + 1:
            return None, {"tokens": 0, "seconds": 0.0, "reason": "region too long for the model"}
        ids, stats = speculative_decode(self.model, prompt, draft, budget, {self.end_id}, self.draft_len)
        info: dict[str, Any] = {"tokens": stats.tokens, "seconds": stats.seconds, "forward_passes": stats.forward_passes,
                "accepted": stats.accepted}
        if not ids or ids[-1] != self.end_id:
            info["reason"] = "the model's answer did not end"
            return None, info
        return self.tokenizer.decode(ids[:-1], skip_special_tokens=False), info

    def apply(self, original: str, sketch: str, language: str | None = None, path: str | None = None,
              options: ApplyOptions | None = None) -> ApplyResult:
        """The checked merged file, or an abstain (``reason`` starts with ``fallback:``)."""
        return checked_region_merge(original, sketch, language, path, options, self.rewrite_region)


Writer = Callable[[str, str], "tuple[str | None, dict[str, Any]]"]


def checked_region_merge(original: str, sketch: str, language: str | None, path: str | None,
                         options: ApplyOptions | None, writer: Writer) -> ApplyResult:
    """Cut the sketch into regions, have ``writer(region_text, segment)`` write each one's final
    text, splice, and keep the file only if the checks pass (the benchmark also runs it with
    the true texts as the writer: the most this way of recovering could give)."""
    started = time.perf_counter()
    stats: dict[str, Any] = {"method": "fallback", "model_tokens": 0, "model_seconds": 0.0, "regions": 0}

    def abstain(reason: str) -> ApplyResult:
        stats["seconds"] = time.perf_counter() - started
        return ApplyResult("abstained", reason=f"fallback: {reason}", path=path, confidence=0.0,
                           stats=stats)

    regs = regions(original, sketch, language)
    if not regs:
        return abstain("a sketch block has no single window in the original")
    olines, slines = lines_of(original), lines_of(sketch)
    parts: list[tuple[Region, str]] = []
    for region in regs:
        region_text, segment = region.original_text(olines), region.segment_text(slines)
        text, info = writer(region_text, segment)
        stats["regions"] += 1
        stats["model_tokens"] += info["tokens"]
        stats["model_seconds"] += info["seconds"]
        if text is None:
            return abstain(info.get("reason", "no answer"))
        problem = _region_problem(region_text, segment, text, language)
        if problem:
            return abstain(problem)
        parts.append((region, text))
    merged = splice(original, parts)
    if merged == original:
        return abstain("the answer changes nothing")
    # The rules' checks on the spliced file: merged as a marker-free sketch, it must come
    # back as itself with the same deletion limit and parse check the rules' answers pass.
    opts = replace(options or ApplyOptions(), cross_check=False)
    check = apply_sketch(original, merged, language, path, opts)
    if not check.applied:
        return abstain(f"checks: {check.reason}")
    if check.merged != merged:
        return abstain("checks: the spliced file does not merge back as itself")
    check.confidence = 0.5
    check.stats.update(stats, seconds=time.perf_counter() - started)
    return check


def _region_problem(region: str, segment: str, answer: str, language: str | None) -> str | None:
    """Why one region's answer cannot be right, or None.

    * every line it writes is a line of the region as it stands (indentation included) or a
      code line of the segment (which may be re-indented: sketches shift);
    * every code line the segment shows is in it, in the segment's order (a lazy sketch's
      shown lines are all in the final file);
    * the lines it keeps from the region only, it keeps in the region's order.
    """
    rlines = lines_of(region)
    exact = {line.rstrip() for line in rlines}
    code = [line for line in lines_of(segment) if classify(line.strip(), language)[0] == LineKind.CODE]
    exact |= {line.rstrip() for line in code}
    loose = {line.strip() for line in code}
    written = lines_of(answer)
    for line in written:
        if line.rstrip() not in exact and line.strip() not in loose:
            return "the answer writes a line neither the original nor the sketch has"
    keys = [line.strip() for line in written if line.strip()]
    shown = [line.strip() for line in code if line.strip()]
    if not _subsequence(shown, keys):
        return "the answer leaves out a line the sketch shows, or reorders them"
    kept = [k for k in keys if k not in loose]
    if not _subsequence(kept, [line.strip() for line in rlines if line.strip()]):
        return "the answer reorders the original's lines"
    return None


def _subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)
