"""Program checks a cascade uses to decide whether a cheap answer is good enough.

Each verifier takes the answer text and returns ``None`` when it passes, or the reason it
failed. Config names them under a route's ``verify:`` list.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Callable

from router.config import VerifierConfig

__all__ = ["build_verifier", "extract_code"]

Verifier = Callable[[str], "str | None"]
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.S)


def extract_code(text: str) -> str:
    """The first fenced code block, or the whole text when there is none."""
    m = _FENCE.search(text)
    return m.group(1) if m else text


def _nonempty(text: str) -> str | None:
    return None if text.strip() else "the answer is empty"


def _json(text: str) -> str | None:
    try:
        json.loads(extract_code(text))
    except ValueError as exc:
        return f"the answer is not JSON: {exc}"
    return None


def _python(text: str) -> str | None:
    try:
        ast.parse(extract_code(text))
    except SyntaxError as exc:
        return f"the answer's code does not parse: line {exc.lineno}: {exc.msg}"
    return None


def build_verifier(cfg: VerifierConfig) -> Verifier:
    if cfg.kind == "regex":
        pattern = re.compile(cfg.pattern or "")

        def _regex(text: str) -> str | None:
            return None if pattern.search(text) else f"the answer does not match /{cfg.pattern}/"

        return _regex
    return {"nonempty": _nonempty, "json": _json, "python": _python}[cfg.kind]
