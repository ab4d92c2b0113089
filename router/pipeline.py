"""The edit pipeline: retrieve → frontier sketch → apply → verify → escalate.

One request edits one or more files of a repository (or texts passed inline). The frontier
model spends its tokens on a lazy sketch; the deterministic applier turns it into the full
file. When the applier abstains or verification fails, the request escalates along the
strategy's chain (issue 7):

    sketch → model-based applier (if configured) → search/replace blocks → whole-file rewrite

Every step lands in the trace with its model, tokens, cost, latency (and whether that
latency was *measured* or *modelled* by the replay frontier) and why it escalated. Nothing
touches the disk unless ``write`` is set, and then every file is written atomically (temp
file + ``os.replace``) only after the whole edit succeeded.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from router.errors import BadRequest

if TYPE_CHECKING:
    from router.frontier import FrontierClient
    from router.replay import LatencyModel

__all__ = [
    "CHAINS",
    "EditPipeline",
    "EditRequest",
    "EditResult",
    "Step",
    "apply_search_replace",
    "build_messages",
    "parse_blocks",
    "parse_search_replace",
]

#: The formats a strategy tries, in order. ``model_apply`` is inserted after ``sketch``
#: when a model-based applier is configured.
CHAINS: dict[str, tuple[str, ...]] = {
    "cascade": ("sketch", "search_replace", "whole_file"),
    "sketch": ("sketch",),
    "search_replace": ("search_replace",),
    "whole_file": ("whole_file",),
}
ModelApplier = Callable[[str, str, "str | None", "str | None"], Any]
"""(original, sketch, language, path) -> ApplyResult, e.g. a small model's speculative edit."""


@dataclass
class Step:
    """One entry of the trace."""

    stage: str  # retrieve | frontier | apply | verify | write
    outcome: str  # ok | abstained | failed | error | skipped
    format: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    latency_kind: str = "measured"  # measured | modelled (replay frontier)
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class EditRequest:
    instruction: str
    repo: str | None = None
    files: list[str] = field(default_factory=list)
    """Paths (relative to ``repo``) the model may edit; empty: chosen by retrieval."""
    texts: dict[str, str] = field(default_factory=dict)
    """Inline file contents by path (no repository needed); override files on disk."""
    strategy: str = "cascade"
    verify_command: str | None = None
    verify_timeout_s: float = 60.0
    write: bool = False
    replay_task: str | None = None
    """Key of a recorded task for the replay frontier; ignored by real providers."""
    context_k: int = 6


@dataclass
class EditResult:
    status: str  # applied | failed
    route: str
    strategy: str
    mode: str  # replay | real
    diff: str = ""
    files: dict[str, str] = field(default_factory=dict)
    format: str | None = None
    """The format whose answer was accepted."""
    model: str | None = None
    reason: str | None = None
    written: list[str] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return sum(s.cost_usd for s in self.trace)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.trace)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.trace)

    @property
    def latency_s(self) -> float:
        return sum(s.latency_s for s in self.trace)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(cost_usd=round(self.cost_usd, 8), output_tokens=self.output_tokens,
                    prompt_tokens=self.prompt_tokens, latency_s=round(self.latency_s, 6))
        return data


# -- prompts -------------------------------------------------------------------------------
_FORMAT_RULES = {
    "sketch": (
        "Answer with a lazy sketch of each file you change, in a fenced code block whose info "
        "string is the language and the file path (```python src/app.py). Show only the "
        "changed lines with a few unchanged lines around them; stand for every unchanged "
        "stretch with one comment line in the file's comment syntax: `{marker}`. To delete "
        "code, show the lines around it without it, or write a comment `remove NAME`. "
        "A file that does not exist yet is written whole, with no markers."),
    "search_replace": (
        "Answer with SEARCH/REPLACE blocks. Each block is the file path on its own line, "
        "then `<<<<<<< SEARCH`, the exact current lines (unique in the file), `=======`, "
        "the new lines, and `>>>>>>> REPLACE`. An empty SEARCH creates the file."),
    "whole_file": (
        "Answer with the complete new content of each file you change, in a fenced code "
        "block whose info string is the language and the file path. Omit nothing."),
}
_FAMILY_STYLE = {
    # Claude follows XML-tagged sections closely; GPT models the markdown headings.
    "anthropic": ("<instruction>\n{instruction}\n</instruction>", "<context>\n{body}</context>",
                  "<files>\n{body}</files>"),
    "default": ("## Instruction\n{instruction}", "## Context (read only)\n{body}",
                "## Files you may edit\n{body}"),
}


def _family(model: str) -> str:
    name = model.lower()
    return "anthropic" if "claude" in name or name.startswith("anthropic/") else "default"


def build_messages(instruction: str, files: dict[str, str], context: list[str], fmt: str,
                   model: str) -> list[dict[str, str]]:
    """The chat messages asking ``model`` for the change in format ``fmt``."""
    from router.replay import fence
    from specialists.apply.languages import language_for_path

    marker = "// ... existing code ..." if any(
        language_for_path(p) not in (None, "python") for p in files) else "# ... existing code ..."
    system = ("You are a careful software engineer editing a repository. "
              + _FORMAT_RULES[fmt].format(marker=marker)
              + " Write no explanation outside the blocks.")
    head, ctx, body = _FAMILY_STYLE[_family(model)]
    parts = [head.format(instruction=instruction.strip())]
    if context:
        parts.append(ctx.format(body="".join(context)))
    parts.append(body.format(body="".join(
        fence(text, language_for_path(path), path) for path, text in files.items())))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


# -- parsing answers -----------------------------------------------------------------------
_FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n", re.M)


def parse_blocks(answer: str) -> list[tuple[str | None, str]]:
    """Fenced blocks as (path or None, body). The path is the info string's last word with
    a dot or slash in it (```python src/a.py``, ```src/a.py``)."""
    blocks: list[tuple[str | None, str]] = []
    pos = 0
    while True:
        m = _FENCE.search(answer, pos)
        if not m:
            return blocks
        ticks = m.group(1)
        close = re.compile(rf"^{re.escape(ticks[0])}{{{len(ticks)},}}[ \t]*$", re.M)
        end = close.search(answer, m.end())
        if end is None:
            return blocks
        words = m.group(2).split()
        path = next((w for w in reversed(words) if "." in w or "/" in w), None)
        blocks.append((path, answer[m.end():end.start()]))
        pos = end.end()


_SR = re.compile(r"(?:^|\n)([^\n]*)\n<<<<<<< SEARCH\n(.*?)^=======\n(.*?)^>>>>>>> REPLACE",
                 re.S | re.M)


def parse_search_replace(answer: str) -> list[tuple[str, str, str]]:
    """SEARCH/REPLACE blocks as (path, search, replace)."""
    return [(m.group(1).strip().strip("`"), m.group(2), m.group(3)) for m in _SR.finditer(answer)]


def apply_search_replace(text: str, search: str, replace: str) -> tuple[str | None, str | None]:
    """(new text, None) or (None, why). SEARCH must occur exactly once (exactly, or once
    ignoring trailing whitespace on each line)."""
    if not search.strip():
        return (text + replace if text else replace), None
    count = text.count(search)
    if count == 1:
        return text.replace(search, replace, 1), None
    if count > 1:
        return None, f"SEARCH text occurs {count} times"
    lines = text.splitlines(keepends=True)
    want = [ln.rstrip() for ln in search.splitlines()]
    hits = [i for i in range(len(lines) - len(want) + 1)
            if [ln.rstrip() for ln in lines[i:i + len(want)]] == want]
    if len(hits) != 1:
        return None, "SEARCH text not found" if not hits else f"SEARCH occurs {len(hits)} times"
    i = hits[0]
    return "".join(lines[:i]) + replace + "".join(lines[i + len(want):]), None


# -- the pipeline ----------------------------------------------------------------------------
@dataclass
class _Call:
    text: str
    model: str


class EditPipeline:
    """Runs edit requests for one route: its frontier targets (first live one answers, the
    rest are fallbacks), an optional model-based applier and optional retrieval."""

    def __init__(self, frontier: "FrontierClient", targets: list[str], *, route: str = "edit",
                 latency: dict[str, "LatencyModel"] | None = None,
                 index_base: Path | None = None, auto_index: bool = True,
                 model_applier: ModelApplier | None = None,
                 index_config: Any = None,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        if not targets:
            raise BadRequest(f"route {route!r} has no targets")
        self.frontier = frontier
        self.targets = targets
        self.route = route
        self.latency = latency or {}
        self.index_base = index_base
        self.auto_index = auto_index
        self.model_applier = model_applier
        self.index_config = index_config
        """``retrieval.IndexConfig`` for indexes this pipeline builds (default: retrieval's)."""
        self.progress = progress

    @property
    def mode(self) -> str:
        replay = [self._is_replay(t) for t in self.targets]
        return "replay" if all(replay) else "real" if not any(replay) else "mixed"

    def _is_replay(self, target: str) -> bool:
        return self.frontier.models[target].model.startswith("replay/")

    def chain(self, strategy: str) -> list[str]:
        if strategy not in CHAINS:
            raise BadRequest(f"strategy {strategy!r} is not one of {sorted(CHAINS)}",
                             param="strategy")
        steps = list(CHAINS[strategy])
        if self.model_applier is not None and steps[0] == "sketch" and len(steps) > 1:
            steps.insert(1, "model_apply")
        return steps

    async def run(self, req: EditRequest) -> EditResult:
        chain = self.chain(req.strategy)
        result = EditResult("failed", self.route, req.strategy, self.mode)
        if not req.instruction.strip():
            raise BadRequest("instruction is empty", param="instruction")
        files, context = await self._gather(req, result.trace)
        if files is None:
            result.reason = result.trace[-1].reason
            return result
        last_sketch: str | None = None
        fallback: tuple[dict[str, str], str] | None = None
        for at, fmt in enumerate(chain):
            merged = await self._attempt(fmt, req, files, context, result, last_sketch)
            if isinstance(merged, str):  # the sketch, kept for the model-based applier
                last_sketch = merged
                continue
            if merged is None:
                continue
            why = await self._verify(req, files, merged, result.trace)
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
                return self._finish(req, files, merged, fmt, result)
        if fallback is not None:
            return self._finish(req, files, fallback[0], fallback[1], result)
        result.reason = "every step of the chain failed: " + "; ".join(
            f"{s.format or s.stage}: {s.reason}" for s in result.trace
            if s.outcome in ("abstained", "failed", "error") and s.reason) + (
            "" if any(s.stage == "frontier" and s.outcome == "ok" for s in result.trace)
            else " (no frontier model answered: " + "; ".join(
                f"{s.model}: {s.reason}" for s in result.trace
                if s.stage == "frontier" and s.outcome == "skipped") + ")")
        return result

    # -- input ---------------------------------------------------------------------------
    async def _gather(self, req: EditRequest, trace: list[Step]) -> tuple[dict[str, str] | None,
                                                                           list[str]]:
        files: dict[str, str] = {}
        for path in req.files:
            if path in req.texts:
                continue
            files[path] = self._read(req, path)
        files.update(req.texts)
        context: list[str] = []
        if req.repo:
            from starlette.concurrency import run_in_threadpool

            context, found = await run_in_threadpool(self._retrieve, req, trace, not files)
            if not files:
                for path in found[:2]:
                    files[path] = self._read(req, path)
        if not files:
            trace.append(Step("retrieve", "failed", reason=(
                "no file to edit: pass files (--file) or a repository whose index finds "
                "code for the instruction")))
            return None, context
        return files, context

    def _read(self, req: EditRequest, path: str) -> str:
        """A file of the repository; one that does not exist is a new file (empty)."""
        root = Path(req.repo or ".").resolve()
        full = (root / path).resolve()
        if root != full and root not in full.parents:
            raise BadRequest(f"file {path!r} is outside the repository", param="files")
        try:
            return full.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequest(f"cannot read {path!r}: {exc}", param="files") from exc

    def _retrieve(self, req: EditRequest, trace: list[Step],
                  must: bool) -> tuple[list[str], list[str]]:
        """Context chunks and candidate files. An unindexed repository is indexed only when
        retrieval must choose the files (``must``): with files named, indexing a whole
        repository would cost more than the edit."""
        from retrieval import Index
        from retrieval.specialist import index_dir_for

        started = time.perf_counter()
        repo = Path(req.repo or ".").resolve()
        if not repo.is_dir():
            raise BadRequest(f"repository {str(repo)!r} is not a directory", param="repo")
        base = self.index_base or Path("~/.complement/indexes").expanduser()
        index = Index.open(index_dir_for(base, repo), self.index_config)
        note = None
        if not index.chunks:
            if not (self.auto_index and must):
                trace.append(Step("retrieve", "skipped", latency_s=_since(started), reason=(
                    f"{repo} is not indexed; run `complement index {repo}` first "
                    "(continuing without retrieved context)")))
                return [], []
            stats = index.refresh(repo, progress=self.progress)
            note = (f"{repo} was not indexed: indexed {stats.files_read} files "
                    f"({stats.chunks_total} chunks) in {stats.seconds:.1f}s")
        hits = index.search(req.instruction, k=req.context_k)
        context = [f"{h.chunk.path}:{h.chunk.start_line}\n{h.chunk.text}\n" for h in hits]
        paths = list(dict.fromkeys(h.chunk.path for h in hits))
        trace.append(Step("retrieve", "ok", latency_s=_since(started), reason=note,
                          detail={"hits": [{"path": h.chunk.path, "line": h.chunk.start_line,
                                            "symbol": h.chunk.symbol,
                                            "score": round(float(h.score), 4)} for h in hits]}))
        return context, paths

    # -- one step of the chain -----------------------------------------------------------
    async def _attempt(self, fmt: str, req: EditRequest, files: dict[str, str],
                       context: list[str], result: EditResult,
                       last_sketch: str | None) -> dict[str, str] | str | None:
        if fmt == "model_apply":
            return self._model_apply(files, last_sketch, result.trace)
        call = await self._call(fmt, req, files, context, result.trace)
        if call is None:
            return None
        started = time.perf_counter()
        merged, why, detail = _merge_answer(fmt, call.text, files)
        step = Step("apply", "ok" if merged is not None else "abstained", format=fmt,
                    latency_s=_since(started), reason=why, detail=detail)
        result.trace.append(step)
        if merged is None and fmt == "sketch" and self.model_applier is not None:
            return call.text
        return merged

    async def _call(self, fmt: str, req: EditRequest, files: dict[str, str],
                    context: list[str], trace: list[Step]) -> _Call | None:
        from router.frontier import translate

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
            return _Call(_text(call.response), target)
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

    def _model_apply(self, files: dict[str, str], sketch: str | None,
                     trace: list[Step]) -> dict[str, str] | None:
        if sketch is None or self.model_applier is None:
            return None
        started = time.perf_counter()
        merged: dict[str, str] = {}
        for path, body in _sketch_bodies(sketch, files):
            res = self.model_applier(files.get(path, ""), body, None, path)
            if not getattr(res, "applied", False):
                trace.append(Step("apply", "abstained", format="model_apply",
                                  latency_s=_since(started), reason=getattr(res, "reason", None)))
                return None
            merged[path] = res.merged
        trace.append(Step("apply", "ok", format="model_apply", latency_s=_since(started)))
        return merged or None

    # -- verification and output -----------------------------------------------------------
    async def _verify(self, req: EditRequest, files: dict[str, str], merged: dict[str, str],
                      trace: list[Step]) -> str | None:
        started = time.perf_counter()
        why = _parse_regression(files, merged)
        if why is None and req.verify_command:
            from starlette.concurrency import run_in_threadpool

            why = await run_in_threadpool(_run_command, req, merged)
        trace.append(Step("verify", "ok" if why is None else "failed",
                          latency_s=_since(started), reason=why,
                          detail={"command": req.verify_command}))
        return why

    def _finish(self, req: EditRequest, files: dict[str, str], merged: dict[str, str],
                fmt: str, result: EditResult) -> EditResult:
        result.status, result.format, result.files = "applied", fmt, merged
        result.model = next((s.model for s in reversed(result.trace) if s.model), None)
        result.diff = "".join(_diff(files.get(p, ""), text, p) for p, text in merged.items())
        if req.write:
            started = time.perf_counter()
            result.written = _write_atomically(Path(req.repo or "."), merged)
            result.trace.append(Step("write", "ok", latency_s=_since(started),
                                     detail={"files": result.written}))
        return result


def _text(response: Any) -> str:
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError):
        return ""


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _only_path(files: dict[str, str]) -> str | None:
    return next(iter(files)) if len(files) == 1 else None


def _sketch_bodies(answer: str, files: dict[str, str]) -> list[tuple[str, str]]:
    out = []
    for path, body in parse_blocks(answer):
        path = path or _only_path(files)
        if path is not None:
            out.append((path, body))
    return out


def _merge_answer(fmt: str, answer: str, files: dict[str, str]
                  ) -> tuple[dict[str, str] | None, str | None, dict[str, Any]]:
    """The merged files for one frontier answer, or (None, why it failed, detail)."""
    if fmt == "search_replace":
        return _merge_search_replace(answer, files)
    bodies = _sketch_bodies(answer, files)
    if not bodies:
        return None, "the answer has no code block for a file (prose only?)", {}
    merged: dict[str, str] = {}
    guesses: dict[str, int] = {}
    for path, body in bodies:
        original = files.get(path, "")
        if fmt == "whole_file":
            merged[path] = _match_final_newline(body, original)
            continue
        from specialists.apply import apply_sketch

        res = apply_sketch(original, body, path=path)
        if not res.applied:
            return None, f"{path}: the applier abstained: {res.reason}", {"span": res.span}
        invented = _invented_lines(original, res.merged or "", body)
        if invented:
            return None, (f"{path}: the merge added {len(invented)} line(s) the sketch does not "
                          f"contain, e.g. {invented[0]!r}"), {"invented": invented[:5]}
        unexplained = _unexplained_deletion(original, res.merged or "", body)
        if unexplained:
            return None, f"{path}: {unexplained}", {}
        merged[path] = _match_final_newline(res.merged or "", original)
        for key in ("fuzzy_placements", "blank_guesses"):
            if res.stats.get(key):
                guesses[key] = guesses.get(key, 0) + int(res.stats[key])
    new = [p for p in merged if p not in files or not files[p]]
    detail: dict[str, Any] = {"new_files": new} if new else {}
    if guesses:
        detail["guesses"] = guesses
    return merged, None, detail


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


def _invented_lines(original: str, merged: str, sketch: str) -> list[str]:
    """Lines the merge added that the sketch never wrote (as a multiset, blank lines and
    trailing whitespace aside). A merge may only move the model's lines into place; one
    that re-indents or duplicates code has guessed, and the cascade should escalate."""
    import difflib
    from collections import Counter

    a, b = original.splitlines(), merged.splitlines()
    added: Counter[str] = Counter()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            added.update(line.rstrip() for line in b[j1:j2] if line.strip())
    have = Counter(line.rstrip() for line in sketch.splitlines() if line.strip())
    return sorted((added - have).elements())


def _unexplained_deletion(original: str, merged: str, sketch: str) -> str | None:
    """A deleted run the sketch does not show. A sketch deletes code by writing the lines
    around it next to each other, or by a ``remove`` comment naming or quoting it. When the
    merge deleted a run that neither explains, the applier guessed."""
    import difflib

    from specialists.apply.markers import LineKind, classify

    keys = [line.strip() for line in sketch.splitlines()]
    classes = [classify(k) if k else (LineKind.CODE, None) for k in keys]
    kinds = [c[0] for c in classes]
    removes = [c[1] for c in classes if c[0] == LineKind.REMOVE and c[1] is not None]
    a, b = original.splitlines(), merged.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag not in ("delete", "replace"):
            continue
        prev = next((a[i].strip() for i in range(i1 - 1, -1, -1) if a[i].strip()), None)
        nxt = next((a[i].strip() for i in range(i2, len(a)) if a[i].strip()), None)
        if prev is None or nxt is None:
            continue
        new = [ln.strip() for ln in b[j1:j2] if ln.strip()]
        adjacent = lambda x, y: _adjacent_in_sketch(keys, kinds, x, y, LineKind.MARKER)  # noqa: E731
        if not new and adjacent(prev, nxt):
            continue
        if new:  # a replacement: the new lines stand where the old ones were
            left, right = adjacent(prev, new[0]), adjacent(new[-1], nxt)
            if (left and right) or ((left or right) and i2 - i1 <= j2 - j1 + 2):
                continue
        if any(_names_run(info, a[i1:i2]) for info in removes):
            continue
        return (f"the merge deleted lines {i1 + 1}-{i2} though the sketch neither shows "
                f"{prev[:40]!r} next to {nxt[:40]!r} nor names them in a remove comment")
    return None


def _names_run(info: Any, run: list[str]) -> bool:
    """Does a remove comment (its quotes or its name) point into the deleted run?"""
    lines = [ln.strip() for ln in run if ln.strip()]
    if not lines:
        return True
    if any(q.strip() in (lines[0], lines[-1]) for q in info.remove_quotes):
        return True
    name = info.remove_name
    return bool(name) and any(re.search(rf"\b{re.escape(name)}\b", ln) for ln in lines[:3])


def _adjacent_in_sketch(keys: list[str], kinds: list[Any], prev: str, nxt: str,
                        marker: Any) -> bool:
    for p, key in enumerate(keys):
        if key != prev:
            continue
        for q in range(p + 1, len(keys)):
            if kinds[q] == marker:
                break
            if keys[q] == nxt:
                return True
    return False


def _merge_search_replace(answer: str, files: dict[str, str]
                          ) -> tuple[dict[str, str] | None, str | None, dict[str, Any]]:
    blocks = parse_search_replace(answer)
    if not blocks:
        return None, "the answer has no SEARCH/REPLACE block (prose only?)", {}
    current = dict(files)
    touched: dict[str, str] = {}
    for i, (path, search, replace) in enumerate(blocks, 1):
        only = _only_path(files)
        if path not in current and only and not ("/" in path or "." in path):
            path = only  # a bare word where the path should be: the one file shown
        text, why = apply_search_replace(current.get(path, ""), search, replace)
        if text is None:
            return None, f"{path}: block {i}: {why}", {"blocks": len(blocks)}
        current[path] = touched[path] = text
    return touched, None, {"blocks": len(blocks)}


def _match_final_newline(body: str, original: str) -> str:
    """A fenced block always ends in a newline, so an answer cannot say whether the file
    ends with one: keep the original's missing final newline."""
    if original and not original.endswith("\n") and body.endswith("\n"):
        return body[:-1]
    return body


def _parse_regression(files: dict[str, str], merged: dict[str, str]) -> str | None:
    """A file that parsed before (tree-sitter) and does not after fails verification."""
    from specialists.apply.checks import parser_for
    from specialists.apply.languages import language_for_path

    for path, text in merged.items():
        parser = parser_for(language_for_path(path))
        if parser is None:
            continue
        before = files.get(path, "")
        if parser.parse(text.encode()).root_node.has_error and not (
                before and parser.parse(before.encode()).root_node.has_error):
            return f"{path} does not parse after the edit"
    return None


def _run_command(req: EditRequest, merged: dict[str, str]) -> str | None:
    """Run the verification command on a scratch copy of the repo holding the merged files."""
    with tempfile.TemporaryDirectory(prefix="complement-verify-") as tmp:
        root = Path(tmp) / "repo"
        if req.repo:
            shutil.copytree(req.repo, root, symlinks=True,
                            ignore=shutil.ignore_patterns(".git", "node_modules", ".venv"))
        else:
            root.mkdir()
        for path, text in merged.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        proc = subprocess.Popen(req.verify_command or "", shell=True, cwd=root,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, text=True)
        try:
            out, _ = proc.communicate(timeout=req.verify_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the whole group: a hung test runner leaves children
            proc.communicate()
            return (f"verification command timed out after {req.verify_timeout_s:g}s: "
                    f"{req.verify_command}")
        if proc.returncode != 0:
            tail = (out or "").strip().splitlines()[-5:]
            return f"verification command exited {proc.returncode}: " + " | ".join(tail)
    return None


def _diff(before: str, after: str, path: str) -> str:
    import difflib

    lines = difflib.unified_diff(before.splitlines(keepends=True),
                                 after.splitlines(keepends=True),
                                 f"a/{path}" if before else "/dev/null", f"b/{path}")
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n"
                   for ln in lines)


def _write_atomically(root: Path, merged: dict[str, str]) -> list[str]:
    """Every file goes to a temp file beside it first; only then is each os.replace'd, so a
    failure while writing leaves every target untouched."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in merged.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            if target.exists():
                shutil.copymode(target, tmp)
            staged.append((path, Path(tmp)))
    except BaseException:
        for _, staged_file in staged:
            staged_file.unlink(missing_ok=True)
        raise
    for path, staged_file in staged:
        os.replace(staged_file, root / path)
    return [p for p, _ in staged]
