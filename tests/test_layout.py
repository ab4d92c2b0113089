"""What imports what across the top-level folders (issue 39): the product (``router``,
``specialists``, ``retrieval``) imports neither ``benchmarks`` nor ``tests``; ``tests``
import the product and never a benchmark (a benchmark is tested by running it, as a script);
``benchmarks`` import the product and never the tests.

import-linter's ``product-alone`` contract (pyproject.toml) checks the product's static
imports; this reads every file's syntax tree, so it also sees what the linter does not:
imports inside the tests and benchmarks (not root packages), ``importlib.import_module``
with a literal name, and a module loaded from a file path under ``benchmarks/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: folder -> the top-level packages its modules may not import
FORBIDDEN = {
    "router": {"benchmarks", "tests"},
    "specialists": {"benchmarks", "tests"},
    "retrieval": {"benchmarks", "tests"},
    "tests": {"benchmarks"},
    "benchmarks": {"tests"},
}


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import, importlib.import_module("literal")
    included, and of every file path literal that names a ``.py`` under ``benchmarks/``
    when the module also loads modules from paths."""
    loads_paths = any(isinstance(n, ast.Attribute) and n.attr in ("spec_from_file_location", "run_path")
                      for n in ast.walk(tree))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
              in ("import_module", "__import__") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
        elif loads_paths and isinstance(node, ast.Constant) and node.value in ("benchmarks",):
            out.append((node.lineno, "benchmarks (a file loaded by path)"))
    return out


def offenders(folder: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError:  # a fixture that is data, not a module (tests/apply/fixtures)
            continue
        for line, name in imported(tree):
            if name.split(".")[0].split(" ")[0] in FORBIDDEN[folder]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    return bad


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_folder_imports_what_it_must_not(folder: str) -> None:
    assert offenders(folder) == [], f"{folder} may not import {sorted(FORBIDDEN[folder])}"


def test_the_check_sees_each_kind_of_import() -> None:
    lazy = ast.parse("def f():\n    from benchmarks.loop_learn import paired_gain\n")
    dynamic = ast.parse("import importlib\nm = importlib.import_module('tests.conftest')\n")
    by_path = ast.parse("import importlib.util\n"
                        "spec = importlib.util.spec_from_file_location('x', ROOT / 'benchmarks' / 'x.py')\n")
    assert [n for _, n in imported(lazy)] == ["benchmarks.loop_learn"]
    assert "tests.conftest" in [n for _, n in imported(dynamic)]
    assert any(n.startswith("benchmarks") for _, n in imported(by_path))
