"""The layers run one way (DESIGN.md): the import-linter contracts in pyproject.toml hold."""

from __future__ import annotations

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
    assert len(kept) >= 5, proc.stdout


def test_no_library_file_names_the_router() -> None:
    """The same rule read as text, so it holds for files import-linter cannot parse too."""
    pattern = re.compile(r"^\s*(from|import)\s+router\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for d in ("specialists", "retrieval")
                 for p in (ROOT / d).rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
