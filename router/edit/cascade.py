"""The edit cascade: retrieve → frontier sketch → apply → verify → escalate.

One request edits one or more files of a repository (or texts passed inline). The frontier
model spends its tokens on a lazy sketch; the applier (the registry's specialist of kind
``apply``) turns it into the full file. When the applier abstains or verification fails,
the request escalates along the strategy's chain (issue 7):

    sketch → model-based applier (if configured) → search/replace blocks → whole-file rewrite

The pipeline is handed everything it uses — the applier, the retriever, the verifiers and
the allowed roots — so a YAML edit that swaps a specialist changes this path too. Prompts
and answer parsing live in ``planning``, paths and writes in ``workspace``, checks in
``verify``.

Every step lands in the trace with its model, tokens, cost, latency (and whether that
latency was *measured* or *modelled* by the replay frontier) and why it escalated. Nothing
touches the disk unless ``write`` is set, and then every file is written at once or none
is, only after the whole edit succeeded, and only files the request gave the edit (an
answer naming another path is refused as a whole: ``Workspace.check_answer``). A
verification command that cannot run in its sandbox fails the edit before any model is
asked.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from router.edit.outcome import EditRequest, EditResult, Step
from router.edit.planning import (
    CHAINS,
    answer_paths,
    build_messages,
    match_final_newline,
    merge_search_replace,
    sketch_bodies,
)
from router.edit.verify import ParseCheck, Verifier, invented_lines, unexplained_deletion
from router.edit.workspace import Workspace, unwritable
from specialists.base import ForbiddenError, Specialist, SpecialistError, UnavailableError
from specialists.paths import expand_home, resolve_repo

if TYPE_CHECKING:
    from router.frontier import FrontierClient
    from router.replay import LatencyModel

__all__ = ["EditPipeline", "EditRequest", "EditResult", "ModelApplier", "Step"]

ModelApplier = Callable[[str, str, "str | None", "str | None"], Any]
"""(original, sketch, language, path) -> ApplyResult, e.g. a small model's speculative edit."""


@dataclass
class _Call:
    text: str
    model: str


class EditPipeline:
    """Runs edit requests for one route: its frontier targets (first live one answers, the
    rest are fallbacks), the applier, optional retrieval, the verifiers, and an optional
    model-based applier tried after the sketch abstains.

    ``allowed_roots``: a request's ``repo`` must lie under one of them (checked by
    ``specialists.paths.resolve_repo``, as ``/v1/index`` is); ``None`` trusts the caller
    (the CLI, on the user's own machine). ``verifiers`` default to the parse check alone.
    """

    def __init__(self, frontier: "FrontierClient", targets: list[str], *, applier: Specialist,
                 route: str = "edit", retriever: Any = None,
                 verifiers: Sequence[Verifier] | None = None,
                 allowed_roots: Sequence[str | Path] | None = None,
                 latency: dict[str, "LatencyModel"] | None = None, auto_index: bool = True,
                 model_applier: ModelApplier | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        if not targets:
            raise SpecialistError(f"route {route!r} has no targets", param="route")
        self.frontier = frontier
        self.targets = targets
        self.route = route
        self.applier = applier
        self.retriever = retriever
        """Anything with ``search_repo(repo, query, k, build=, progress=)`` (the registry's
        ``retrieval`` specialist); ``None``: no retrieved context."""
        self.verifiers: list[Verifier] = list(verifiers) if verifiers is not None \
            else [ParseCheck()]
        self.allowed_roots = list(allowed_roots) if allowed_roots is not None else None
        self.latency = latency or {}
        self.auto_index = auto_index
        self.model_applier = model_applier
        self.progress = progress

    @property
    def mode(self) -> str:
        replay = [self._is_replay(t) for t in self.targets]
        return "replay" if all(replay) else "real" if not any(replay) else "mixed"

    def _is_replay(self, target: str) -> bool:
        return self.frontier.models[target].model.startswith("replay/")

    def chain(self, strategy: str) -> list[str]:
        if strategy not in CHAINS:
            raise SpecialistError(f"strategy {strategy!r} is not one of {sorted(CHAINS)}",
                                  param="strategy")
        steps = list(CHAINS[strategy])
        if self.model_applier is not None and steps[0] == "sketch" and len(steps) > 1:
            steps.insert(1, "model_apply")
        return steps

    async def run(self, req: EditRequest) -> EditResult:
        chain = self.chain(req.strategy)
        result = EditResult("failed", self.route, req.strategy, self.mode)
        if not req.instruction.strip():
            raise SpecialistError("instruction is empty", param="instruction")
        workspace = self._workspace(req)
        files, context = await self._gather(req, workspace, result.trace)
        if files is None:
            result.reason = result.trace[-1].reason
            return result
        workspace.allow(files)  # an answer may change these files and no other
        blocked = self._unavailable()
        if blocked is not None:  # fail closed before any model is asked
            result.trace.append(Step("verify", "failed", reason=blocked))
            result.reason = blocked
            return result
        last_sketch: str | None = None
        fallback: tuple[dict[str, str], str] | None = None
        for at, fmt in enumerate(chain):
            merged = await self._attempt(fmt, req, workspace, files, context, result,
                                         last_sketch)
            if isinstance(merged, dict):
                workspace.check_answer(list(merged))  # untrusted: refused before any use
            if isinstance(merged, str):  # the sketch, kept for the model-based applier
                last_sketch = merged
                continue
            if merged is None:
                continue
            why = await self._verify(workspace, files, merged, result.trace)
            if why is None:
                guessed = _guessed(result.trace)
                if guessed and at + 1 < len(chain):
                    # The applier read the sketch one way where it could be read another
                    # (placement by similarity, blank lines it kept): a later step writes the
                    # change in full; this merge stays as the answer if none succeeds.
                    fallback = fallback or (merged, fmt)
                    result.trace[-1].reason = f"{guessed}; escalating (kept as a fallback)"
                    result.trace[-1].detail["guessed"] = True
                    continue
                return self._finish(req, workspace, files, merged, fmt, result)
        if fallback is not None:
            return self._finish(req, workspace, files, fallback[0], fallback[1], result)
        result.reason = _why_failed(result.trace)
        return result

    # -- input ---------------------------------------------------------------------------
    def _workspace(self, req: EditRequest) -> Workspace:
        if not req.repo:
            if req.write:
                raise SpecialistError("write needs repo: the directory the files are written "
                                      "into", param="write")
            return Workspace(None)
        if self.allowed_roots is not None:
            return Workspace(resolve_repo(req.repo, self.allowed_roots))
        repo = expand_home(req.repo).resolve()
        if not repo.is_dir():
            raise SpecialistError(f"repository {str(repo)!r} is not a directory", param="repo")
        return Workspace(repo)

    async def _gather(self, req: EditRequest, workspace: Workspace, trace: list[Step]
                      ) -> tuple[dict[str, str] | None, list[str]]:
        # Each path in its plain form (``./a.py`` is ``a.py``): the model sees those names,
        # and an answer may name only them (``Workspace.allow``).
        named: list[str] = []
        for path in req.files:
            named.append(workspace.check(path))
            if req.write:
                _writable(path, "files")
        texts: dict[str, str] = {}
        for path, text in req.texts.items():
            texts[workspace.check(path, param="texts")] = text
            if req.write:
                _writable(path, "texts")
        files: dict[str, str] = {p: workspace.read(p) for p in named if p not in texts}
        files.update(texts)
        context: list[str] = []
        if workspace.root is not None:
            from starlette.concurrency import run_in_threadpool

            context, found = await run_in_threadpool(self._retrieve, req, workspace.root,
                                                     trace, not files)
            if not files:
                if req.write:  # never offer the model a file that could not be written
                    found = [p for p in found if unwritable(p) is None]
                for path in found[:2]:
                    files[path] = workspace.read(workspace.check(path))
        if not files:
            trace.append(Step("retrieve", "failed", reason=(
                "no file to edit: pass files (--file) or a repository whose index finds "
                "code for the instruction")))
            return None, context
        return files, context

    def _retrieve(self, req: EditRequest, repo: Path, trace: list[Step],
                  must: bool) -> tuple[list[str], list[str]]:
        """Context chunks and candidate files. An unindexed repository is indexed only when
        retrieval must choose the files (``must``): with files named, indexing a whole
        repository would cost more than the edit."""
        started = time.perf_counter()
        if self.retriever is None:
            trace.append(Step("retrieve", "skipped", reason=(
                "no retrieval specialist is configured (continuing without retrieved "
                "context)")))
            return [], []
        try:
            hits, note = self.retriever.search_repo(
                repo, req.instruction, req.context_k, build=self.auto_index and must,
                progress=self.progress)
        except UnavailableError as exc:
            trace.append(Step("retrieve", "skipped", latency_s=_since(started),
                              reason=f"{exc.message} (continuing without retrieved context)"))
            return [], []
        if not hits and note:
            trace.append(Step("retrieve", "skipped", latency_s=_since(started), reason=note))
            return [], []
        context = [f"{h.chunk.path}:{h.chunk.start_line}\n{h.chunk.text}\n" for h in hits]
        paths = list(dict.fromkeys(h.chunk.path for h in hits))
        trace.append(Step("retrieve", "ok", latency_s=_since(started), reason=note,
                          detail={"hits": [{"path": h.chunk.path, "line": h.chunk.start_line,
                                            "symbol": h.chunk.symbol,
                                            "score": round(float(h.score), 4)} for h in hits]}))
        return context, paths

    # -- one step of the chain -----------------------------------------------------------
    async def _attempt(self, fmt: str, req: EditRequest, workspace: Workspace,
                       files: dict[str, str], context: list[str], result: EditResult,
                       last_sketch: str | None) -> dict[str, str] | str | None:
        if fmt == "model_apply":
            return self._model_apply(files, last_sketch, result.trace)
        call = await self._call(fmt, req, files, context, result.trace)
        if call is None:
            return None
        # Every path the answer names, before any of it is applied: one the request did not
        # give the edit refuses the whole answer (ForbiddenError, 403), whatever the rest.
        workspace.check_answer(answer_paths(fmt, call.text, files))
        started = time.perf_counter()
        merged, why, detail = self._merge_answer(fmt, call.text, files)
        step = Step("apply", "ok" if merged is not None else "abstained", format=fmt,
                    latency_s=_since(started), reason=why, detail=detail)
        result.trace.append(step)
        if merged is None and fmt == "sketch" and self.model_applier is not None:
            return call.text
        return merged

    async def _call(self, fmt: str, req: EditRequest, files: dict[str, str],
                    context: list[str], trace: list[Step]) -> _Call | None:
        from router.frontier import message_text, translate

        for target in self.targets:
            why = self.frontier.missing_key(target)
            if why is not None:
                trace.append(Step("frontier", "skipped", format=fmt, model=target, reason=why))
                continue
            messages = build_messages(req.instruction, files, context, fmt,
                                      self.frontier.models[target].model)
            params = {"metadata": {"replay_task": req.replay_task, "replay_format": fmt}} \
                if req.replay_task and self._is_replay(target) else {}
            started = time.perf_counter()
            try:
                call = await self.frontier.complete(target, messages, params)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # translated: every upstream error has a table row
                error = translate(exc, target)
                trace.append(Step("frontier", "error", format=fmt, model=target,
                                  latency_s=_since(started), reason=error.message))
                continue
            trace.append(self._frontier_step(fmt, target, call, _since(started)))
            return _Call(message_text(call.response), target)
        return None

    def _frontier_step(self, fmt: str, target: str, call: Any, wall_s: float) -> Step:
        out = int(call.usage.get("completion_tokens", 0))
        step = Step("frontier", "ok", format=fmt, model=target,
                    prompt_tokens=int(call.usage.get("prompt_tokens", 0)), output_tokens=out,
                    cost_usd=float(call.cost_usd or 0.0), latency_s=wall_s)
        if self._is_replay(target):
            from router.replay import DEFAULT_LATENCY

            model = self.latency.get(target, DEFAULT_LATENCY)
            step.latency_s, step.latency_kind = model.seconds(out), "modelled"
            step.detail["wall_s"] = round(wall_s, 6)
        return step

    # -- merging an answer -----------------------------------------------------------------
    def _merge_answer(self, fmt: str, answer: str, files: dict[str, str]
                      ) -> tuple[dict[str, str] | None, str | None, dict[str, Any]]:
        """The merged files for one frontier answer, or (None, why it failed, detail)."""
        if fmt == "search_replace":
            return merge_search_replace(answer, files)
        bodies = sketch_bodies(answer, files)
        if not bodies:
            return None, "the answer has no code block for a file (prose only?)", {}
        merged: dict[str, str] = {}
        guesses: dict[str, int] = {}
        for path, body in bodies:
            # a second block for a file a first one changed applies to that file's new text
            # (an answer that shows two places of one file in two fences)
            original = merged[path] if path in merged else files.get(path, "")
            if fmt == "whole_file":
                merged[path] = match_final_newline(body, original)
                continue
            text, why, span, stats = self._apply(original, body, path)
            if text is None:
                return None, f"{path}: the applier abstained: {why}", {"span": span}
            written = None
            if stats.get("format"):  # a diff or SEARCH/REPLACE blocks: their new lines
                from specialists.apply import edit_new_lines

                written = edit_new_lines(body, original, path)
            invented = invented_lines(original, text, body if written is None else written)
            if invented:
                return None, (f"{path}: the merge added {len(invented)} line(s) the sketch does "
                              f"not contain, e.g. {invented[0]!r}"), {"invented": invented[:5]}
            # such an answer shows every line it deletes
            unexplained = None if written is not None else unexplained_deletion(original, text, body)
            if unexplained:
                return None, f"{path}: {unexplained}", {}
            merged[path] = match_final_newline(text, original)
            for key in ("fuzzy_placements", "blank_guesses"):
                if stats.get(key):
                    guesses[key] = guesses.get(key, 0) + int(stats[key])
        new = [p for p in merged if p not in files or not files[p]]
        detail: dict[str, Any] = {"new_files": new} if new else {}
        if guesses:
            detail["guesses"] = guesses
        return merged, None, detail

    def _apply(self, original: str, sketch: str, path: str
               ) -> tuple[str | None, str | None, Any, dict[str, Any]]:
        """One file through the applier: (merged or None, why it abstained, span, stats).

        The applier's answer follows the ``apply`` contract: ``output["files"][0]`` holds
        ``merged`` (and optionally ``reason``, ``span``, ``stats``)."""
        result = self.applier.answer({"original": original, "sketch": sketch, "path": path})
        files = (result.output or {}).get("files") or [{}]
        first = files[0] if isinstance(files[0], dict) else {}
        if result.abstained or first.get("merged") is None:
            return None, first.get("reason") or result.reason, first.get("span"), {}
        return str(first["merged"]), None, first.get("span"), dict(first.get("stats") or {})

    def _model_apply(self, files: dict[str, str], sketch: str | None,
                     trace: list[Step]) -> dict[str, str] | None:
        if sketch is None or self.model_applier is None:
            return None
        started = time.perf_counter()
        merged: dict[str, str] = {}
        for path, body in sketch_bodies(sketch, files):
            res = self.model_applier(files.get(path, ""), body, None, path)
            if not getattr(res, "applied", False):
                trace.append(Step("apply", "abstained", format="model_apply",
                                  latency_s=_since(started), reason=getattr(res, "reason", None)))
                return None
            merged[path] = res.merged
        trace.append(Step("apply", "ok", format="model_apply", latency_s=_since(started)))
        return merged or None

    # -- verification and output -----------------------------------------------------------
    def _unavailable(self) -> str | None:
        """Why a verifier cannot run at all (its sandbox tool is missing), or ``None``."""
        for verifier in self.verifiers:
            check = getattr(verifier, "unavailable", None)
            why = check() if check is not None else None
            if why is not None:
                return why
        return None

    async def _verify(self, workspace: Workspace, files: dict[str, str],
                      merged: dict[str, str], trace: list[Step]) -> str | None:
        from starlette.concurrency import run_in_threadpool

        started = time.perf_counter()
        checks = await run_in_threadpool(self._run_checks, workspace, files, merged)
        why = next((c.reason for c in checks if c.reason), None)
        detail: dict[str, Any] = {"checks": [c.name for c in checks]}
        commands = [c.detail for c in checks if c.detail]
        if commands:
            detail["commands"] = commands
        trace.append(Step("verify", "ok" if why is None else "failed",
                          latency_s=_since(started), reason=why, detail=detail))
        return why

    def _run_checks(self, workspace: Workspace, files: dict[str, str],
                    merged: dict[str, str]) -> list[Any]:
        """Each verifier in order until one fails; the scratch copy is made once, and only
        if a verifier needs it (after the cheap checks passed)."""
        done: list[Any] = []
        scratch: Path | None = None
        with ExitStack() as stack:
            for verifier in self.verifiers:
                if verifier.needs_scratch and scratch is None:
                    scratch = stack.enter_context(workspace.scratch(merged))
                check = verifier.check(files, merged, scratch if verifier.needs_scratch
                                       else None)
                done.append(check)
                if check.reason:
                    break
        return done

    def _finish(self, req: EditRequest, workspace: Workspace, files: dict[str, str],
                merged: dict[str, str], fmt: str, result: EditResult) -> EditResult:
        result.status, result.format, result.files = "applied", fmt, merged
        result.model = next((s.model for s in reversed(result.trace) if s.model), None)
        result.diff = "".join(_diff(files.get(p, ""), text, p) for p, text in merged.items())
        if req.write:
            started = time.perf_counter()
            result.written = workspace.write(merged)
            result.trace.append(Step("write", "ok", latency_s=_since(started),
                                     detail={"files": result.written}))
        return result


def _writable(path: str, param: str) -> None:
    why = unwritable(path)
    if why is not None:
        raise ForbiddenError(f"{path!r} cannot be edited with write: {why}. Leave write "
                             "false to get the diff, and apply it yourself", param=param)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _guessed(trace: list[Step]) -> str | None:
    """What the last apply step guessed, if anything (from the applier's stats)."""
    step = next((s for s in reversed(trace) if s.stage == "apply"), None)
    if step is None or step.outcome != "ok":
        return None
    guesses = step.detail.get("guesses") or {}
    if not guesses:
        return None
    return "the applier " + " and ".join(
        {"fuzzy_placements": "placed {} block(s) by similarity",
         "blank_guesses": "kept {} blank run(s) the sketch wrote shorter"}[k].format(v)
        for k, v in sorted(guesses.items()))


def _why_failed(trace: list[Step]) -> str:
    """Every failed step's reason, once each; and, if no model answered, why not."""
    failed = dict.fromkeys(f"{s.format or s.stage}: {s.reason}" for s in trace
                           if s.outcome in ("abstained", "failed", "error") and s.reason)
    if any(s.stage == "frontier" and s.outcome == "ok" for s in trace):
        return "every step of the chain failed: " + "; ".join(failed)
    skipped = dict.fromkeys(f"{s.model}: {s.reason}" for s in trace
                            if s.stage == "frontier" and s.outcome == "skipped")
    why = "no frontier model answered: " + "; ".join(skipped)
    return why + (" (and " + "; ".join(failed) + ")" if failed else "")


def _diff(before: str, after: str, path: str) -> str:
    import difflib

    lines = difflib.unified_diff(before.splitlines(keepends=True),
                                 after.splitlines(keepends=True),
                                 f"a/{path}" if before else "/dev/null", f"b/{path}")
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n"
                   for ln in lines)
