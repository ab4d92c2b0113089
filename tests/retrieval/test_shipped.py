"""The shipped default embedder: quantised faithfully, checked by its checksums, found
before any build, and the one the package carries loads and encodes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedders import StaticEmbedder, default_model_path, save_static
from retrieval.shipped import SHIPPED_DIR, ship
from specialists.base import OptionsError


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    vocab = json.loads((default_model_path() / "tokenizer.json").read_text())["model"]["vocab"]
    table = np.random.default_rng(1).normal(size=(len(vocab), 24)).astype(np.float32)
    return save_static(tmp_path / "tiny", table, default_model_path() / "tokenizer.json",
                       {"recipe": "test"})


def test_ship_quantises_faithfully_and_records_checksums(tiny: Path, tmp_path: Path) -> None:
    meta = ship(tiny, tmp_path / "shipped")
    assert meta["quantized"] and set(meta["sha256"]) == {"embeddings.int8.npy",
                                                         "embeddings.scales.npy"}
    assert "complement retrieval finetune" in meta["rebuild"]
    assert not (tmp_path / "shipped" / "tokenizer.json").exists(), "MiniLM's, from its package"
    original, shipped = StaticEmbedder(tiny), StaticEmbedder(tmp_path / "shipped")
    texts = ["def parse(path): return open(path).read()", "read a file", "the cat sat"]
    a, b = original.encode(texts), shipped.encode(texts)
    assert a.shape == b.shape
    assert np.min(np.sum(a * b, axis=1)) > 0.999, "int8 rows keep the direction"


def test_a_corrupt_shipped_table_is_refused_saying_how_to_rebuild(tiny: Path,
                                                                  tmp_path: Path) -> None:
    ship(tiny, tmp_path / "shipped")
    target = tmp_path / "shipped" / "embeddings.int8.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(OptionsError, match="checksum mismatch.*retrieval finetune"):
        StaticEmbedder(tmp_path / "shipped")


def test_the_default_is_the_local_build_else_the_shipped_one(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval.embedders import default_static_path, tuned_static_path

    monkeypatch.setenv("COMPLEMENT_HOME", str(tmp_path / "home"))
    if (SHIPPED_DIR / "static.json").is_file():
        assert default_static_path() == SHIPPED_DIR
    save_static(tuned_static_path(), np.ones((3, 4), np.float32),
                default_model_path() / "tokenizer.json", {"recipe": "test"})
    assert default_static_path() == tuned_static_path()


@pytest.mark.skipif(not (SHIPPED_DIR / "static.json").is_file(),
                    reason="no shipped embedder in this checkout")
def test_the_shipped_default_loads_and_ranks_code_by_meaning() -> None:
    emb = StaticEmbedder(SHIPPED_DIR)
    assert emb.dim == 256 and emb.meta["quantized"]
    docs = emb.encode(["def read_file(path):\n    with open(path) as fh:\n        return fh.read()",
                       "def add(a, b):\n    return a + b"])
    query = emb.encode_query("open a file and return its contents")
    assert float(docs[0] @ query) > float(docs[1] @ query)
