"""File 1 of 3: the specialist. ``kind`` names its work; ``answer`` is the whole contract.

It knows nothing of HTTP (a specialist never imports the router): it takes a request
mapping and returns a ``Result``, or abstains with a reason, or raises a
``specialists.base`` error for input it cannot take at all (the router answers 400).
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

from specialists.base import Result, Specialist, SpecialistError, SpecialistOptions


class OutlineOptions(SpecialistOptions):
    """Its YAML ``options``, checked when the server loads it (a typo fails the start)."""

    private: bool = False
    """List names that start with ``_`` too."""


class OutlineSpecialist(Specialist):
    """The top-level functions and classes of a Python module, in order."""

    kind = "outline"
    version = "1"
    Options = OutlineOptions

    def __init__(self, private: bool = False) -> None:
        super().__init__(private=private)
        self.private = private

    def answer(self, request: Mapping[str, Any]) -> Result:
        source = request.get("source")
        if not isinstance(source, str):
            raise SpecialistError("source must be the module's text", param="source")
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:  # not ours to guess: say why, the caller decides
            return Result.abstain(f"not Python: line {exc.lineno}: {exc.msg}")
        names = [node.name for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        return Result(output=[n for n in names if self.private or not n.startswith("_")],
                      confidence=1.0)
