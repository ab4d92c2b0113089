"""A real editor as the LSP client (issue 40): headless Neovim starts ``complement lsp``,
reads ``initialize``'s capabilities as an editor does, asks for inline completions only
when they are advertised, and gets ghost text while a file is typed. Neovim's own ghost
text UI comes in 0.12; its LSP client (capabilities, didOpen/didChange, requests) is the
part a plug-in builds on, and what this test drives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.router.test_lsp import TYPED, _config

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("neovim_lsp_client.lua")

pytestmark = pytest.mark.skipif(shutil.which("nvim") is None, reason=(
    "Neovim is not installed (`apt-get install neovim`; .ci/run installs it)"))


def test_neovim_reads_the_capability_asks_and_gets_ghost_text(tmp_path: Path) -> None:
    config = _config(tmp_path)  # the LSP tests' config: tab (sampling) and apply
    out = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NVIM_TEST_OUT": str(out),
           "NVIM_TEST_TYPED": json.dumps(TYPED), "NVIM_TEST_PYTHON": sys.executable,
           "NVIM_TEST_CONFIG": str(config), "NVIM_TEST_REPO": str(REPO),
           "NVIM_TEST_FILE": str(tmp_path / "calc.py"), "HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "share")}
    proc = subprocess.run(["nvim", "--headless", "--clean", "-c", f"luafile {SCRIPT}"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.exists(), f"Neovim wrote no result ({proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, result  # (Lua's nil leaves a key out)
    assert result["advertised"] is True, "initialize did not advertise inlineCompletionProvider"
    assert result.get("shown"), f"asked {result['asked']} times, no ghost text"
