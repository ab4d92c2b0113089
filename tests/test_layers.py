"""The layers run one way (DESIGN.md): the import-linter contracts in pyproject.toml hold."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    command = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    kept = re.findall(r"^(.*) KEPT$", proc.stdout, re.M)
    assert len(kept) >= 7, proc.stdout


def test_no_library_file_names_the_router() -> None:
    """The same rule read as text, so it holds for files import-linter cannot parse too."""
    pattern = re.compile(r"^\s*(from|import)\s+router\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for d in ("specialists", "retrieval")
                 for p in (ROOT / d).rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def _code_strings(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def _names_the_router(text: str) -> bool:
    """A module path of the router (``router.cli``, ``router.api.tab:x``), as ``python -m``
    or ``importlib`` would take it."""
    head = text.split(":")[0]
    return head == "router" or (head.startswith("router.")
                                and all(p.isidentifier() for p in head.split(".")))


def test_nothing_below_the_router_names_a_router_module_in_code() -> None:
    """What import-linter cannot see: a module path in a string (``-m router.cli``, an
    ``import_module``) from specialists/ or retrieval/."""
    found = [(str(path.relative_to(ROOT)), text)
             for package in ("specialists", "retrieval")
             for path in sorted((ROOT / package).rglob("*.py"))
             for text in _code_strings(path) if _names_the_router(text)]
    assert found == [], f"take the router's part from the caller instead: {found}"
    assert _names_the_router("router.cli") and _names_the_router("router.api.tab:router")
    assert not _names_the_router("router above the specialists")


def test_the_applier_has_no_import_circle_even_for_types() -> None:
    """Issue 36: ``merger`` and five step modules imported each other (the steps for the
    ``Merger`` type). The steps now take a ``reading.Reading``; the circle is gone with
    ``TYPE_CHECKING`` imports counted too, which the import-linter contracts leave out."""
    import grimp

    graph = grimp.build_graph("specialists", include_external_packages=False)
    modules = sorted(m for m in graph.modules if m.startswith("specialists.apply."))
    circles = sorted({tuple(sorted((a, b))) for a in modules
                      for b in graph.find_modules_directly_imported_by(a)
                      if b.startswith("specialists.apply.") and b != a
                      and graph.chain_exists(importer=b, imported=a)})
    assert len(modules) > 20 and circles == [], circles
