"""(docstring, code) training pairs from Python sources, for contrastive fine-tuning.

The query side is the first paragraph of a function's docstring; the document side is
the function as the index would show it (its file path, then its source with the
docstring removed). Test files are left out, and so is the standard library by default,
which is the benchmark.
"""

from __future__ import annotations

import ast
import os
import re
import site
import sysconfig
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["default_roots", "iter_pairs"]

_SKIP_DIRS = {"test", "tests", "testing", "__pycache__", ".git", "idle_test", "_vendor", "vendor",
              "vendored", "_vendored", "_distutils", "extern", "_extern", "third_party"}


def default_roots() -> list[Path]:
    """The installed site-packages (never the standard library)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    roots = []
    for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}:
        path = Path(p).resolve()
        if path.is_dir() and path != stdlib:
            roots.append(path)
    return sorted(roots)


def _first_paragraph(doc: str) -> str:
    return " ".join(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0].split())


def pairs_from_source(rel: str, source: str, max_code_lines: int = 60) -> Iterator[tuple[str, str]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    lines = source.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or not isinstance(node.body[0], ast.Expr):
            continue
        query = _first_paragraph(doc)
        if len(query.split()) < 3:
            continue
        d0, d1 = node.body[0].lineno - 1, (node.body[0].end_lineno or node.body[0].lineno) - 1
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        end = (node.end_lineno or node.lineno) - 1
        body = lines[start:d0] + lines[d1 + 1: end + 1]
        if len(body) > max_code_lines:
            body = body[:max_code_lines]
        code = "\n".join(body).strip("\n")
        if code:
            yield query, f"{rel}\n{code}"


def iter_pairs(roots: Iterable[Path] | None = None, max_pairs: int = 50_000,
               max_file_bytes: int = 500_000,
               exclude: Iterable[str] = ()) -> Iterator[tuple[str, str]]:
    """Unique-docstring pairs from every non-test ``.py`` under ``roots``, leaving out
    the top-level packages named in ``exclude`` (kept aside for tuning elsewhere)."""
    excluded = set(exclude)
    seen: set[str] = set()
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    count = 0
    for root in roots or default_roots():
        root = Path(root).resolve()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            here = Path(dirpath)
            if here == root:
                dirnames[:] = [d for d in dirnames if d not in excluded]
            if here == stdlib or stdlib in here.parents and "site-packages" not in here.parts:
                dirnames[:] = []
                continue
            for name in sorted(filenames):
                if not name.endswith(".py") or name.startswith("test_") or name == "conftest.py":
                    continue
                path = here / name
                try:
                    if path.stat().st_size > max_file_bytes:
                        continue
                    source = path.read_text("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                for query, code in pairs_from_source(path.relative_to(root).as_posix(), source):
                    if query in seen:
                        continue
                    seen.add(query)
                    yield query, code
                    count += 1
                    if count >= max_pairs:
                        return
