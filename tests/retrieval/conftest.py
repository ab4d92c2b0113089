from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small multi-language repository copied from the fixtures."""
    root = tmp_path / "root" / "repo"
    shutil.copytree(FIXTURES / "languages", root / "src")
    (root / "README.md").write_text("# Sample\n\nA repository for retrieval tests.\n")
    return root


@pytest.fixture
def embedder():
    from retrieval.embedders import HashingEmbedder

    return HashingEmbedder(64)


@pytest.fixture
def config():
    from retrieval.index import IndexConfig

    return IndexConfig(embedder="hash:64", max_chunk_chars=400, min_chunk_chars=50)
