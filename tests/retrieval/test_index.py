from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from retrieval.index import FORMAT_VERSION, Filters, Index, IndexConfig


def build(tmp_path: Path, repo: Path, config: IndexConfig, embedder) -> Index:
    index = Index.open(tmp_path / "index", config, embedder)
    index.refresh(repo)
    return index


def test_build_search_and_reopen(tmp_path, repo, config, embedder) -> None:
    index = build(tmp_path, repo, config, embedder)
    assert {c.language for c in index.chunks} >= {"python", "go", "rust", "java",
                                                   "javascript", "typescript", "tsx", "text"}
    hits = index.search("parse config file", k=3)
    assert hits[0].chunk.symbol == "parse_config_file"
    assert hits[0].retriever in {"bm25", "dense", "both"}
    again = Index.open(tmp_path / "index", config, embedder)
    assert again.notice is None and len(again.chunks) == len(index.chunks)
    assert again.search("parse config file", k=1)[0].chunk.symbol == "parse_config_file"


def test_modes_and_filters(tmp_path, repo, config, embedder) -> None:
    index = build(tmp_path, repo, config, embedder)
    for mode in ("bm25", "dense", "hybrid"):
        hits = index.search("server start", k=5, mode=mode)
        assert hits and all(h.retriever in (mode, "both") or mode == "hybrid" for h in hits)
    go_only = index.search("server start", k=5, filters=Filters.make(language="go"))
    assert go_only and {h.chunk.language for h in go_only} == {"go"}
    globbed = index.search("user", k=5, filters=Filters.make(path_glob="src/*.ts"))
    assert globbed and {h.chunk.path for h in globbed} == {"src/sample.ts"}
    assert index.search("user", filters=Filters.make(language="cobol")) == []
    assert index.search("+ - *", k=3, mode="bm25") == []  # no vocabulary word: no crash


def test_refresh_reembeds_only_changed_chunks(tmp_path, repo, config, embedder) -> None:
    index = build(tmp_path, repo, config, embedder)
    total = len(index.chunks)
    embedder.calls = 0
    stats = index.refresh(repo)
    assert (stats.files_read, stats.chunks_embedded, embedder.calls) == (0, 0, 0)

    path = repo / "src" / "sample.py"
    path.write_text(path.read_text() + "\n\ndef brand_new_helper(value):\n    return value * 2\n")
    stats = index.refresh(repo)
    assert stats.files_changed == 1 and stats.files_read == 1
    assert stats.chunks_embedded == embedder.calls <= 2  # the new function (and a merged neighbour)
    assert stats.chunks_reused >= 1
    assert index.search("brand new helper", k=1)[0].chunk.path == "src/sample.py"

    (repo / "src" / "sample.go").unlink()
    stats = index.refresh(repo)
    assert stats.files_removed == 1 and stats.chunks_embedded == 0
    assert all(c.path != "src/sample.go" for c in index.chunks)
    assert len(index.chunks) < total + 2


def test_touch_without_change_reads_but_does_not_embed(tmp_path, repo, config, embedder) -> None:
    index = build(tmp_path, repo, config, embedder)
    path = repo / "src" / "sample.rs"
    os.utime(path, ns=(1, 1))
    embedder.calls = 0
    stats = index.refresh(repo)
    assert stats.files_read == 1 and stats.files_changed == 0 and embedder.calls == 0


def test_crash_mid_save_leaves_previous_index_usable(tmp_path, repo, config, embedder,
                                                     monkeypatch) -> None:
    index = build(tmp_path, repo, config, embedder)
    before = len(index.chunks)
    (repo / "src" / "extra.py").write_text("def extra_function():\n    return 42\n")

    def crash(*args, **kwargs):
        raise OSError("simulated power cut")

    monkeypatch.setattr(os, "replace", crash)  # dies just before CURRENT is switched
    with pytest.raises(OSError):
        index.refresh(repo)
    monkeypatch.undo()
    survivor = Index.open(tmp_path / "index", config, embedder)
    assert survivor.notice is None and len(survivor.chunks) == before
    assert survivor.refresh(repo).files_added == 1  # and the next refresh completes
    assert not list((tmp_path / "index").glob(".tmp-*"))
    assert len(list((tmp_path / "index").glob("gen-*"))) == 1


def _gen(tmp_path: Path) -> Path:
    return tmp_path / "index" / (tmp_path / "index" / "CURRENT").read_text().strip()


@pytest.mark.parametrize("damage", ["vectors", "meta", "version", "current", "embedder"])
def test_corrupt_or_mismatched_index_is_rebuilt(tmp_path, repo, config, embedder, damage) -> None:
    build(tmp_path, repo, config, embedder)
    gen = _gen(tmp_path)
    if damage == "vectors":
        data = bytearray((gen / "vectors.npy").read_bytes())
        data[-8:] = b"\xff" * 8
        (gen / "vectors.npy").write_bytes(bytes(data))
    elif damage == "meta":
        (gen / "meta.json").write_text("{not json")
    elif damage == "version":
        meta = json.loads((gen / "meta.json").read_text())
        meta["format_version"] = FORMAT_VERSION + 1
        (gen / "meta.json").write_text(json.dumps(meta))
    elif damage == "current":
        (tmp_path / "index" / "CURRENT").write_text("gen-999999\n")
    elif damage == "embedder":
        from retrieval.embedders import HashingEmbedder

        embedder = HashingEmbedder(32)
    index = Index.open(tmp_path / "index", config, embedder)
    assert index.notice and "rebuilding" in index.notice
    assert index.chunks == []
    stats = index.refresh(repo)
    assert stats.chunks_total > 0 and stats.chunks_embedded == stats.chunks_total
    assert Index.open(tmp_path / "index", config, embedder).notice is None


def test_chunking_change_rechunks_and_reuses_vectors(tmp_path, repo, config, embedder) -> None:
    build(tmp_path, repo, config, embedder)
    bigger = IndexConfig(**{**config.__dict__, "max_chunk_chars": 5000})
    index = Index.open(tmp_path / "index", bigger, embedder)
    assert index.notice and "chunking" in index.notice
    stats = index.refresh(repo)
    assert stats.files_added == stats.files_seen
    assert all(len(c.text) <= 5000 for c in index.chunks)


def test_skipped_files_are_counted_not_fatal(tmp_path, repo, config, embedder) -> None:
    (repo / "blob.py").write_bytes(b"\x00\x01binary")
    (repo / "latin.py").write_bytes("x = 'caf\u00e9'".encode("latin-1"))
    (repo / "gen.py").write_text("# @generated by a tool\nx = 1\n")
    index = build(tmp_path, repo, config, embedder)
    stats = index.refresh(repo)
    assert stats.skipped["binary"] == 1 and stats.skipped["not_utf8"] == 1
    assert stats.skipped["generated"] == 1
    assert not {"blob.py", "latin.py", "gen.py"} & {c.path for c in index.chunks}


def test_approximate_index_above_threshold(tmp_path, repo, embedder) -> None:
    config = IndexConfig(embedder="hash:64", max_chunk_chars=80, min_chunk_chars=1,
                         ann_threshold=10, ann_nprobe=64)
    index = build(tmp_path, repo, config, embedder)
    import faiss

    assert isinstance(index._faiss, faiss.IndexIVF)
    hits = index.search("checksum data", k=3, mode="dense")
    assert hits and hits[0].score <= 1.0001
    exact = sorted(((float(v @ embedder.encode_query("checksum data")), i)
                    for i, v in enumerate(index.vectors)), reverse=True)[0]
    assert np.isclose(hits[0].score, exact[0], atol=1e-4)


def test_rrf_fusion_mode(tmp_path, repo, embedder) -> None:
    config = IndexConfig(embedder="hash:64", fusion="rrf")
    index = build(tmp_path, repo, config, embedder)
    assert "parse_config_file" in index.search("parse config file", k=1)[0].chunk.symbol


def test_failed_save_is_retried_by_the_same_object(tmp_path, repo, config, embedder,
                                                   monkeypatch) -> None:
    index = build(tmp_path, repo, config, embedder)
    (repo / "src" / "late.py").write_text("def late_arrival():\n    return 1\n")
    monkeypatch.setattr(os, "replace", lambda *a, **k: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError):
        index.refresh(repo)
    monkeypatch.undo()
    assert index.refresh(repo).files_added == 1
    assert "src/late.py" in {c.path for c in Index.open(tmp_path / "index", config, embedder).chunks}


def test_two_writers_take_turns_and_see_each_other(tmp_path, repo, config, embedder) -> None:
    first = build(tmp_path, repo, config, embedder)
    second = Index.open(tmp_path / "index", config, embedder)
    (repo / "src" / "one.py").write_text("def from_first():\n    return 1\n")
    first.refresh(repo)
    (repo / "src" / "two.py").write_text("def from_second():\n    return 2\n")
    stats = second.refresh(repo)  # reloads the first writer's generation, adds only two.py
    assert stats.files_added == 1
    paths = {c.path for c in Index.open(tmp_path / "index", config, embedder).chunks}
    assert {"src/one.py", "src/two.py"} <= paths
