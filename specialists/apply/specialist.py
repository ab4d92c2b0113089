"""``ApplySpecialist``: the registry specialist of kind ``"apply"``.

Config block (every option is a constructor keyword)::

    specialists:
      apply:
        class: specialists.apply:ApplySpecialist
        options:
          max_delete_share: 0.3
          parse_check: true
          cross_check: true      # a second, global reading must give the same file
          model: null            # a local HF causal LM path: rewrites the file on an abstain
          model_options: {device: cpu, max_new_tokens: 8192, draft_len: 24}
          fallback: null         # a train_fallback directory: rewrites the regions on an abstain
          tie_rewrite: false     # a tied block goes where its new lines rewrite like old ones
          tie_file_end: false    # ...or, last with no marker after it, at the file's end
          reading_search: false  # issue 36: readings searched where the rules abstain, scored
          scorer_threshold: null # null: the thresholds shipped with scorer_weights.json
          scorer_rules_threshold: null

A request is ``{"original", "sketch", "path"?, "language"?}`` or ``{"files": [...]}`` of
those. The answer's output holds one result per file and the combined diff; the request
abstains when any file does, so the router can escalate (results of the files that applied
are still in the output).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from specialists.apply.applier import FileEdit, apply_sketch, combined_diff, warm
from specialists.apply.result import ApplyOptions, ApplyResult
from pydantic import Field, ValidationError

from specialists.base import (OptionsError, Result, Specialist, SpecialistError,
                              SpecialistOptions)

__all__ = ["ApplyOptionsModel", "ApplySpecialist", "parse_files"]


def parse_files(request: Mapping[str, Any]) -> list[FileEdit]:
    """The files of a request, checked; raises ``SpecialistError`` on a malformed one."""
    files = request.get("files")
    if files is None:
        files = [request]
    if not isinstance(files, list) or not files:
        raise SpecialistError("'files' must be a non-empty list of {original, sketch, path?}",
                              param="files")
    edits = []
    for i, item in enumerate(files):
        where = f"files.{i}." if "files" in request else ""
        if not isinstance(item, Mapping):
            raise SpecialistError(f"files.{i} must be an object", param=f"files.{i}")
        for key in ("original", "sketch"):
            if not isinstance(item.get(key), str):
                raise SpecialistError(f"{where}{key} must be a string (the "
                                      f"{'file as it is now' if key == 'original' else 'lazy sketch'})",
                                      param=f"{where}{key}")
        for key in ("path", "language"):
            if item.get(key) is not None and not isinstance(item.get(key), str):
                raise SpecialistError(f"{where}{key} must be a string", param=f"{where}{key}")
        edits.append(FileEdit(item["original"], item["sketch"], item.get("path"), item.get("language")))
    return edits


class ApplyOptionsModel(SpecialistOptions):
    max_delete_share: float = Field(0.3, ge=0, le=1)
    """Abstain when a merge deletes more than this share of the original's lines."""
    parse_check: bool = True
    """Abstain when the edited region stops parsing (tree-sitter)."""
    fuzzy: bool = True
    """Place a modified line by similarity when exactly one region fits."""
    cross_check: bool = True
    """Apply only when a second, global reading of the sketch gives the same file."""
    tie_rewrite: bool = False
    """A block that fits two places equally well goes where its new lines rewrite old lines
    like them (clear margin), instead of abstaining (off by default: see BENCHMARKS.md)."""
    tie_file_end: bool = False
    """...or, as the sketch's last block with no marker after it, at the file's end (off by
    default: see BENCHMARKS.md)."""
    reading_search: bool = False
    """Issue 36: search the sketch's other readings where the rules abstain, and answer only
    what a learned scorer finds likely enough (off by default: see BENCHMARKS.md)."""
    scorer_threshold: float | None = Field(None, ge=0, le=1)
    """The scorer's threshold for a searched reading (null: the one shipped with its weights)."""
    scorer_rules_threshold: float | None = Field(None, ge=0, le=1)
    """The scorer's threshold for the rules' own answer (null: the shipped one)."""
    model: str | None = None
    """A local causal-LM directory: rewrites the file when the rules abstain."""
    model_options: dict[str, Any] | None = None
    """``device``, ``dtype``, ``max_new_tokens``, ``draft_len`` for ``model``."""
    fallback: str | None = None
    """A ``train_fallback`` directory: a small model rewrites the sketch's regions when the
    rules abstain, kept only when the rules' checks pass (off by default: see BENCHMARKS.md)."""


class ApplySpecialist(Specialist):
    """Deterministic sketch applier, with an optional model-based fallback on abstains."""

    kind = "apply"
    version = "1"
    Options = ApplyOptionsModel

    def __init__(self, **options: Any) -> None:
        """``options`` are :class:`ApplyOptionsModel`'s fields, validated by it (written
        once, there)."""
        try:
            opts = ApplyOptionsModel(**options)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise OptionsError(f"apply option {'.'.join(map(str, err['loc']))}: "
                                  f"{err['msg']}", param=".".join(map(str, err["loc"]))) from None
        super().__init__(**{**opts.model_dump(), "model_options": dict(opts.model_options or {})})
        self.apply_options = ApplyOptions(max_delete_share=opts.max_delete_share,
                                          parse_check=opts.parse_check, fuzzy=opts.fuzzy,
                                          cross_check=opts.cross_check,
                                          tie_rewrite=opts.tie_rewrite,
                                          tie_file_end=opts.tie_file_end,
                                          reading_search=opts.reading_search,
                                          scorer_threshold=opts.scorer_threshold,
                                          scorer_rules_threshold=opts.scorer_rules_threshold)
        self.model_name = opts.model
        self.model_options = dict(opts.model_options or {})
        self.fallback: Any = None
        self.region_fallback_path = opts.fallback
        self.region_fallback: Any = None

    def setup(self) -> None:
        # the compiled kernels: loaded from numba's cache (about 0.5 CPU s) or compiled on a
        # cold one (several seconds) here, not on the first request
        warm()
        if self.apply_options.reading_search:
            from specialists.apply.scorer import default_scorer

            default_scorer()  # a missing or stale weights file fails here, with the command
        if self.region_fallback_path:
            from specialists.apply.fallback import RegionFallback

            self.region_fallback = RegionFallback.load(self.region_fallback_path)
        if self.model_name:
            from specialists.apply.model import ModelApplier

            opts = dict(self.model_options)
            load = {k: opts.pop(k) for k in ("device", "dtype") if k in opts}
            self.fallback = ModelApplier.from_pretrained(self.model_name, **load, **opts)

    def apply_file(self, edit: FileEdit) -> ApplyResult:
        result = apply_sketch(edit.original, edit.sketch, edit.language, edit.path, self.apply_options)
        if not result.applied and self.region_fallback is not None:
            learned = self.region_fallback.apply(edit.original, edit.sketch, edit.language, edit.path,
                                                 self.apply_options)
            if learned.applied:
                learned.stats.update(method="learned_fallback", deterministic_reason=result.reason)
                return learned
            result.stats["fallback"] = learned.reason
        if result.applied or self.fallback is None:
            result.stats["method"] = "deterministic"
            return result
        return self._model_apply(edit, result)

    def _model_apply(self, edit: FileEdit, abstained: ApplyResult) -> ApplyResult:
        merged_text, stats = self.fallback.rewrite(edit.original, edit.sketch)
        # Diff the model's file against the original by merging it as a marker-free sketch.
        options = replace(self.apply_options, max_delete_share=1.0, min_delete_lines=1 << 30)
        result = apply_sketch(edit.original, merged_text, edit.language, edit.path, options)
        result.confidence = 0.5
        result.stats.update(method="model", deterministic_reason=abstained.reason,
                            forward_passes=stats.forward_passes, draft_accepted=stats.accepted,
                            model_seconds=stats.seconds)
        return result

    def answer(self, request: Mapping[str, Any]) -> Result:
        results = [self.apply_file(edit) for edit in parse_files(request)]
        output = {"files": [r.to_dict() for r in results], "diff": combined_diff(results)}
        abstained = [r for r in results if not r.applied]
        if abstained:
            reasons = "; ".join(f"{r.path or 'file'}: {r.reason}" for r in abstained)
            return Result(output=output, abstained=True, reason=reasons, confidence=0.0)
        return Result(output=output, confidence=min(r.confidence for r in results))

    def health(self) -> dict[str, Any]:
        return {"ok": True, "version": self.version, "fallback_model": self.model_name,
                "learned_fallback": self.region_fallback_path}
