"""Verification: is a merged edit one to keep?

Three kinds of check, each cheap before the next:

* the merge against its sketch (``invented_lines``, ``unexplained_deletion``): a merge may
  only move the model's lines into place and delete what the sketch shows deleted; the
  cascade escalates otherwise;
* ``ParseCheck``: a file that parsed before (tree-sitter) and does not after fails;
* ``CommandCheck``: a command from the server's config (never from a request), as an argv
  list without a shell, with a timeout, in a scratch copy of the repository holding the
  merged files (``router.edit.workspace``), inside a sandbox that cannot write outside that
  copy or reach the network (``router.edit.sandbox``); its exit status decides and its
  output goes into the trace. Without the sandbox tool it fails closed: nothing runs.

The pipeline receives its checks as arguments (``EditPipeline(verifiers=...)``);
``verifiers_for`` builds the list a config gives a route and repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from router.edit.sandbox import DEFAULT_HIDE, sandbox_env, sandbox_problem, wrap

if TYPE_CHECKING:
    from router.config import VerifyConfig

__all__ = [
    "Check",
    "CommandCheck",
    "ParseCheck",
    "Verifier",
    "invented_lines",
    "unexplained_deletion",
    "verifiers_for",
]

OUTPUT_TAIL_CHARS = 4000
"""How much of a command's output the trace keeps (its end, where test runners summarise)."""


@dataclass
class Check:
    """One verifier's verdict: ``reason`` is ``None`` when it passed."""

    name: str
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class Verifier(Protocol):
    """A check of merged files. ``needs_scratch``: it runs in a scratch copy of the
    repository (``scratch`` is then its root, else ``None``)."""

    name: str
    needs_scratch: bool

    def check(self, before: dict[str, str], merged: dict[str, str],
              scratch: Path | None) -> Check: ...


class ParseCheck:
    """A file that parsed before (tree-sitter) and does not after fails verification."""

    name = "parse"
    needs_scratch = False

    def check(self, before: dict[str, str], merged: dict[str, str],
              scratch: Path | None) -> Check:
        from specialists.apply import has_parse_error, language_for_path

        for path, text in merged.items():
            language = language_for_path(path)
            if not has_parse_error(text, language):
                continue
            old = before.get(path, "")
            if not (old and has_parse_error(old, language)):
                return Check(self.name, f"{path} does not parse after the edit")
        return Check(self.name)


@dataclass
class CommandCheck:
    """Run ``argv`` (no shell) in the scratch copy, inside ``sandbox`` (see
    ``router.edit.sandbox``); a non-zero exit, a timeout or a missing sandbox fails."""

    argv: list[str]
    timeout_s: float = 300.0
    name: str = "command"
    needs_scratch: bool = True
    sandbox: str = "bwrap"
    memory_mb: int = 4096
    pass_env: tuple[str, ...] = ()
    hide: tuple[str, ...] = DEFAULT_HIDE

    def unavailable(self) -> str | None:
        """Why this command cannot run (the sandbox tool is missing), or ``None``."""
        return sandbox_problem(self.sandbox)

    def check(self, before: dict[str, str], merged: dict[str, str],
              scratch: Path | None) -> Check:
        assert scratch is not None, "a command runs in a scratch copy"
        started = time.perf_counter()
        detail: dict[str, Any] = {"argv": list(self.argv), "sandbox": self.sandbox}
        problem = self.unavailable()
        if problem is not None:  # fail closed: model-written code never runs unconfined
            return Check(self.name, problem, detail)
        argv = wrap(self.argv, scratch, sandbox=self.sandbox, memory_mb=self.memory_mb,
                    cpu_s=int(self.timeout_s) + 1, hide=self.hide)
        try:
            proc = subprocess.Popen(argv, cwd=scratch, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=sandbox_env(self.pass_env),
                                    start_new_session=True, text=True, errors="replace")
        except OSError as exc:  # the sandbox's interpreter or tool could not start
            return Check(self.name, f"verification command {self.argv[0]!r} could not start: "
                         f"{exc.strerror or exc}", detail)
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the whole group: a hung test runner leaves children
            out, _ = proc.communicate()
            detail.update(output=_tail(out), seconds=round(time.perf_counter() - started, 3))
            return Check(self.name, f"verification command timed out after "
                         f"{self.timeout_s:g}s: {' '.join(self.argv)}", detail)
        detail.update(exit=proc.returncode, output=_tail(out),
                      seconds=round(time.perf_counter() - started, 3))
        if proc.returncode != 0:
            tail = (out or "").strip().splitlines()[-5:]
            return Check(self.name, f"verification command exited {proc.returncode}: "
                         + " | ".join(tail), detail)
        return Check(self.name, None, detail)


def _tail(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= OUTPUT_TAIL_CHARS else "…" + text[-OUTPUT_TAIL_CHARS:]


def verifiers_for(cfg: "VerifyConfig | None", route: str, repo: Path | None,
                  extra: Sequence[Sequence[str]] = ()) -> list[Verifier]:
    """The parse check, then the commands the config gives ``repo`` (if listed under
    ``repos``) or else ``route``, then ``extra`` (the CLI's own ``--verify``)."""
    checks: list[Verifier] = [ParseCheck()]
    commands: list[list[str]] = []
    timeout = 300.0
    limits: dict[str, Any] = {}
    if cfg is not None:
        timeout = cfg.timeout_s
        limits = {"sandbox": cfg.sandbox, "memory_mb": cfg.memory_mb,
                  "pass_env": tuple(cfg.pass_env), "hide": tuple(cfg.hide)}
        by_repo = {Path(k).expanduser().resolve(): v for k, v in cfg.repos.items()}
        if repo is not None and repo.resolve() in by_repo:
            commands = by_repo[repo.resolve()]
        else:
            commands = cfg.routes.get(route, [])
    for argv in [*commands, *extra]:
        checks.append(CommandCheck(list(argv), timeout, **limits))
    return checks


# -- the merge against its sketch ----------------------------------------------------------
def invented_lines(original: str, merged: str, sketch: str) -> list[str]:
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


def unexplained_deletion(original: str, merged: str, sketch: str) -> str | None:
    """A deleted run the sketch does not show. A sketch deletes code by writing the lines
    around it next to each other, or by a ``remove`` comment naming or quoting it. When the
    merge deleted a run that neither explains, the applier guessed."""
    import difflib

    from specialists.apply import LineKind, classify

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
