"""``apply_sketch``: the deterministic applier's one entry point, and its multi-file form."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterable

from specialists.apply import align, checks, gap_search
from specialists.apply.diff import opcodes, unified_diff
from specialists.apply.edits import apply_edit, read_edit
from specialists.apply.languages import language_for_path
from specialists.apply.merge import merge
from specialists.apply.result import Abstain, ApplyOptions, ApplyResult
from specialists.apply.scorer import choose, default_scorer
from specialists.apply.search import search
from specialists.apply.text import fenced_parts, sketch_text, split_lines

__all__ = ["FileEdit", "apply_many", "apply_sketch", "combined_diff", "warm"]

log = logging.getLogger(__name__)
_DEFAULT = ApplyOptions()


def warm() -> None:
    """Load the applier's compiled kernels (numba: the global alignment's, the gap DP's)
    now rather than on the first sketch: about 0.5 CPU s from numba's cache, several
    seconds to compile them on a cold one (``ApplySpecialist.setup`` calls it)."""
    align.warm()
    gap_search.warm()


@dataclass(frozen=True)
class FileEdit:
    """One file of a multi-file request."""

    original: str
    sketch: str
    path: str | None = None
    language: str | None = None


def apply_sketch(
    original: str,
    sketch: str,
    language: str | None = None,
    path: str | None = None,
    options: ApplyOptions | None = None,
) -> ApplyResult:
    """Merge a lazy sketch into ``original``: the full file and a unified diff, or an abstain.

    Never raises on content: empty, binary, huge or unanchored input comes back as
    ``status="abstained"`` with a reason (and the sketch span at fault when there is one).
    """
    opts = options or _DEFAULT
    started = time.perf_counter()
    language = language or language_for_path(path)
    offset = 0
    edit = None
    parts: list[tuple[str, int]] = []
    try:
        if isinstance(original, str) and isinstance(sketch, str):
            _check_input(original, sketch, opts)
            # SEARCH/REPLACE blocks, a unified diff, an apply_patch envelope
            edit = read_edit(sketch, original, path)
            if edit is None:  # a chat answer with the change in two or more fences
                parts = fenced_parts(sketch, original, language)
            if edit is None and not parts:
                # a fence around it and a first line naming the file are not the sketch's
                sketch, offset = sketch_text(sketch, original, endings=False, path=path)
        if edit is not None:
            result = apply_edit(original, edit, language, path, opts)
        elif parts:
            result = _apply_parts(original, parts, language, path, opts)
        else:
            result = _apply(original, sketch, language, path, opts)
    except Abstain as exc:
        result = ApplyResult("abstained", reason=exc.reason, span=exc.span, path=path,
                             confidence=0.0)
    except RecursionError as exc:  # pragma: no cover - defensive: a clear answer, not a crash
        log.exception("applier failed on %s", path)
        result = ApplyResult("abstained", reason=f"internal error: {exc}", path=path, confidence=0.0)
    if opts.reading_search and edit is None and not parts and _searchable(original, sketch, opts):
        result = _scored(original, sketch, language, path, opts, result)
    if offset and result.span is not None:  # counted in the lines the caller sent
        result.span = (result.span[0] + offset, result.span[1] + offset)
    result.stats["seconds"] = time.perf_counter() - started
    result.stats["language"] = language
    return result


def _apply(original: str, sketch: str, language: str | None, path: str | None,
           opts: ApplyOptions) -> ApplyResult:
    _check_input(original, sketch, opts)
    if not original.strip():
        return _new_file(original, sketch, path)
    merged = merge(original, sketch, language, opts)
    checks.check_placeholders(merged.out, merged.origin)
    checks.check_local_duplicates(merged.out, merged.origin)
    checks.check_split_imports(merged.out, merged.origin)
    checks.check_redefinitions(merged.out, merged.origin, language)
    checks.check_imported_definitions(merged.out, merged.origin, language)
    checks.check_deletions(merged.deleted_by_context, merged.lines.keys, opts)
    if opts.parse_check:
        checks.check_parse(merged.lines.raw, merged.out, merged.origin, language)
    ops = opcodes(merged.origin, len(merged.lines.raw))
    diff = unified_diff(merged.lines.raw, merged.out, ops, path or "file",
                        merged.lines.final_newline, merged.final_newline)
    if not diff:
        raise Abstain("the sketch changes nothing in the file")
    stats = {
        "deleted_by_context": merged.deleted_by_context,
        "deleted_by_remove": merged.deleted_by_remove,
        "fuzzy_placements": merged.fuzzy,
        "blank_guesses": merged.blank_guesses,
        "lines_in": len(merged.lines.raw),
        "lines_out": len(merged.out),
    }
    # A placement by similarity, or blank lines kept that the sketch wrote fewer of, is a
    # reading the sketch does not state: a cascade may prefer to escalate.
    confidence = 1.0 if not merged.fuzzy else 0.8
    if merged.blank_guesses:
        confidence = min(confidence, 0.9)
    return ApplyResult("applied", merged=merged.text(), diff=diff, path=path,
                       confidence=confidence, stats=stats)


def _apply_parts(original: str, parts: list[tuple[str, int]], language: str | None,
                 path: str | None, opts: ApplyOptions) -> ApplyResult:
    """A chat answer's code blocks read as one sketch, in the order they come, with a
    marker between two blocks where neither shows one at the seam (two fences are two
    places of the file). The span of an abstain is counted in the answer's own lines."""
    from specialists.apply.markers import LineKind, classify

    joined: list[str] = []
    where: list[int] = []  # the answer's line (1-based) of each joined line
    for body, before in parts:
        lines = body.split("\n")[:-1]
        numbers = list(range(before + 1, before + 1 + len(lines)))
        head = next((i for i, line in enumerate(lines) if line.strip()), None)
        tail = next((x.strip() for x in reversed(joined) if x.strip()), None)
        if head is not None and tail is not None:
            code = classify(lines[head].strip())[0] == LineKind.CODE
            if code and classify(tail)[0] == LineKind.CODE:
                joined.append("... existing code ...")
                where.append(before)  # the opening fence's line
            elif not code and lines[head].strip() == tail:
                del lines[head], numbers[head]  # the marker that closed the block before
        joined.extend(lines)
        where.extend(numbers)
    result = apply_sketch(original, "".join(line + "\n" for line in joined), language, path, opts)
    if result.span is not None:
        lo, hi = (min(max(k, 1), len(where)) for k in result.span)
        result.span = (where[lo - 1], where[hi - 1])
    if not result.applied and len(parts) > 1 and result.reason:
        result.reason = f"the {len(parts)} code blocks read as one sketch: {result.reason}"
    result.stats["code_blocks"] = len(parts)
    return result


def _check_input(original: str, sketch: str, opts: ApplyOptions) -> None:
    if not isinstance(original, str) or not isinstance(sketch, str):
        raise Abstain("original and sketch must be text")
    if "\x00" in original[:8192] or "\x00" in sketch[:8192]:
        raise Abstain("the file looks binary (it contains NUL bytes)")
    if not sketch.strip():
        raise Abstain("the sketch is empty")
    if original.count("\n") > opts.max_lines or sketch.count("\n") > opts.max_lines:
        raise Abstain(f"input over {opts.max_lines} lines")


def _searchable(original: str, sketch: str, opts: ApplyOptions) -> bool:
    """Input the search can read (what ``_apply`` refuses before reading stays refused)."""
    return (isinstance(original, str) and isinstance(sketch, str) and bool(original.strip())
            and bool(sketch.strip()) and "\x00" not in original[:8192]
            and "\x00" not in sketch[:8192] and original.count("\n") <= opts.max_lines
            and sketch.count("\n") <= opts.max_lines)


def _scored(original: str, sketch: str, language: str | None, path: str | None,
            opts: ApplyOptions, rules: ApplyResult) -> ApplyResult:
    """The reading search and the learned score (issue 36): the best candidate file when its
    probability of being the intended one reaches the threshold, else an abstain that says
    so (the rules' own reason kept in ``stats``)."""
    scorer = default_scorer()
    found = search(original, sketch, language, opts, rules.merged if rules.applied else None,
                   rules.reason, rules.stats)
    best, p = choose(found, scorer)
    if rules.applied:
        threshold = (opts.scorer_rules_threshold if opts.scorer_rules_threshold is not None
                     else scorer.rules_threshold)
    else:
        threshold = opts.scorer_threshold if opts.scorer_threshold is not None else scorer.threshold
    stats = {"scorer_probability": round(p, 4), "scorer_threshold": threshold,
             "candidates": len(found.candidates), "rules_status": rules.status}
    if best is None or p < threshold:
        reason = rules.reason if not rules.applied else None
        why = (f"no reading of the sketch is likely enough to be the intended file "
               f"(best {p:.2f} < {threshold:.2f})")
        out = ApplyResult("abstained", reason=f"{why}; {reason}" if reason else why,
                          span=rules.span, path=path, confidence=p)
        out.stats.update(stats)
        return out
    if best.rules:
        rules.confidence = p
        rules.stats.update(stats)
        return rules
    o = split_lines(original)
    ops = opcodes(best.origin, len(o.raw))
    diff = unified_diff(o.raw, best.lines, ops, path or "file", o.final_newline,
                        best.final_newline)
    if not diff:
        return rules
    stats.update(readings=list(best.readings), rules_reason=rules.reason,
                 fuzzy_placements=best.fuzzy, blank_guesses=best.blank_guesses,
                 deleted_by_context=best.deleted_by_context,
                 deleted_by_remove=best.deleted_by_remove)
    return ApplyResult("applied", merged=best.text, diff=diff, path=path, confidence=p,
                       stats=stats)


def _new_file(original: str, sketch: str, path: str | None) -> ApplyResult:
    """An empty original: the sketch is the file, if it has no marker to resolve."""
    from specialists.apply.markers import LineKind, classify

    sketch, dropped = sketch_text(sketch, original, endings=False)  # its own line endings
    lines = split_lines(sketch)
    for j, key in enumerate(lines.keys):
        if classify(key)[0] != LineKind.CODE:
            raise Abstain("the original is empty but the sketch refers to existing code",
                          (j + 1 + dropped, j + 1 + dropped))
    o = split_lines(original)
    ops = opcodes([-1] * len(lines.raw), len(o.raw))
    diff = unified_diff(o.raw, lines.raw, ops, path or "file", True, lines.final_newline)
    return ApplyResult("applied", merged=sketch, diff=diff, path=path)


def apply_many(edits: Iterable[FileEdit], options: ApplyOptions | None = None) -> list[ApplyResult]:
    """Apply one sketch per file; each file succeeds or abstains on its own."""
    return [apply_sketch(e.original, e.sketch, e.language, e.path, options) for e in edits]


def combined_diff(results: Iterable[ApplyResult]) -> str:
    """One patch for every applied file, in order (``git apply`` takes it whole)."""
    return "".join(r.diff for r in results if r.applied)
