from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedders import StaticEmbedder, default_model_path, save_static
from retrieval.loading import load_embedder


@pytest.fixture
def tiny_static(tmp_path: Path) -> Path:
    """A static model built in the test: random table over MiniLM's tokenizer."""
    vocab = json.loads((default_model_path() / "tokenizer.json").read_text())["model"]["vocab"]
    table = np.random.default_rng(0).normal(size=(len(vocab), 16)).astype(np.float32)
    return save_static(tmp_path / "tiny", table, default_model_path() / "tokenizer.json",
                       {"recipe": "test"})


def test_static_embedder_encodes_unit_vectors(tiny_static: Path) -> None:
    emb = load_embedder(str(tiny_static))
    assert isinstance(emb, StaticEmbedder) and emb.dim == 16
    vecs = emb.encode(["def parse(x): return x", "", "hello world"])
    assert vecs.shape == (3, 16)
    assert np.allclose(np.linalg.norm(vecs[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert np.allclose(emb.encode_query("hello world"), vecs[2])


def test_unknown_spec_is_an_options_error(tmp_path: Path) -> None:
    from specialists.base import OptionsError

    with pytest.raises(OptionsError, match="not 'static'"):
        load_embedder(str(tmp_path / "nope"))


def test_minilm_loads_offline_from_the_package() -> None:
    emb = load_embedder("minilm")
    v = emb.encode(["read a file", "open a file for reading", "the cat sat"])
    assert v.shape == (3, 384)
    assert v[0] @ v[1] > v[0] @ v[2]


@pytest.mark.parametrize("asymmetric", [False, True])
def test_finetune_smoke(tmp_path: Path, tiny_static: Path, asymmetric: bool) -> None:
    from retrieval.finetune import Args, finetune

    src = tmp_path / "pkg"
    src.mkdir()
    funcs = "\n".join(
        f'def helper_{i}(value):\n    """Return the value times {i} for the caller."""\n'
        f"    return value * {i}\n" for i in range(40))
    (src / "mod.py").write_text(funcs)
    report = finetune(Args(base=str(tiny_static), out=tmp_path / "ft", roots=[src],
                           dev_pairs=8, batch_size=8, epochs=2, decontaminate=False,
                           asymmetric=asymmetric),
                      log_fn=lambda _: None)
    assert report["train"] == 32 and report["steps"] == 8
    assert (tmp_path / "ft" / "static.json").is_file()
    tuned = StaticEmbedder(tmp_path / "ft")
    assert tuned.encode(["x"]).shape == (1, 16)
    assert (tmp_path / "ft" / "query_embeddings.npy").is_file() == asymmetric
    same = np.allclose(tuned.encode_query("value times"), tuned.encode(["value times"])[0])
    assert same != asymmetric


def test_finetune_transformer_smoke(tmp_path: Path) -> None:
    """One optimisation step of MiniLM itself: the slow path works end to end."""
    from retrieval.finetune import Args, finetune

    src = tmp_path / "pkg"
    src.mkdir()
    (src / "mod.py").write_text("\n".join(
        f'def op_{i}(x):\n    """Apply operation number {i} to the input."""\n    return x + {i}\n'
        for i in range(12)))
    report = finetune(Args(base="minilm", out=tmp_path / "ft", roots=[src], dev_pairs=4,
                           batch_size=4, epochs=0.5, doc_tokens=32, decontaminate=False),
                      log_fn=lambda _: None)
    assert report["steps"] == 1
    assert (tmp_path / "ft" / "modules.json").is_file()
    emb = load_embedder(str(tmp_path / "ft"))
    assert emb.encode(["x"]).shape == (1, 384)
