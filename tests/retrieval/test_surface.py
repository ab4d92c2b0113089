"""The specialist, POST /v1/index and /v1/retrieve, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from retrieval.specialist import RetrievalSpecialist
from router.errors import install_handlers
from router.registry import Registry
from specialists.base import ForbiddenError, NotFoundError, UnavailableError


@pytest.fixture
def spec(tmp_path: Path, repo: Path) -> RetrievalSpecialist:
    s = RetrievalSpecialist(allowed_root=str(repo.parent), index_dir=str(tmp_path / "indexes"),
                            embedder="hash:64", index={"max_chunk_chars": 400})
    s.setup()
    s._loader.join(timeout=60)
    assert s.health()["ok"]
    return s


@pytest.fixture
def client(spec: RetrievalSpecialist) -> TestClient:
    from router.api.retrieval import router

    app = FastAPI()
    app.state.registry = Registry({"retrieval": spec})
    install_handlers(app)
    app.include_router(router)
    return TestClient(app)


def test_path_escapes_are_refused(spec: RetrievalSpecialist, repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "escape").symlink_to(outside)
    for bad in ["../elsewhere", str(outside), str(repo / ".." / "elsewhere"), "repo/../..",
                str(repo / "escape"), "/etc"]:
        with pytest.raises(ForbiddenError):
            spec.check_path(bad)
    with pytest.raises(NotFoundError):
        spec.check_path("repo/missing")
    assert spec.check_path("repo") == repo.resolve()
    assert spec.check_path(str(repo)) == repo.resolve()


def test_no_allowed_root_means_no_indexing(tmp_path: Path, repo: Path) -> None:
    s = RetrievalSpecialist(index_dir=str(tmp_path / "ix"), embedder="hash:64")
    with pytest.raises(ForbiddenError, match="allowed_root"):
        s.index_repo(str(repo))


def test_requests_wait_for_the_embedder(tmp_path: Path, repo: Path) -> None:

    s = RetrievalSpecialist(allowed_root=str(repo.parent), index_dir=str(tmp_path / "ix"),
                            embedder=str(tmp_path / "no-such-model"))
    s.setup()
    s._loader.join(timeout=60)
    assert not s.health()["ok"] and "OptionsError" in s.health()["error"]
    with pytest.raises(UnavailableError, match="failed to load"):
        s.index_repo(str(repo))


def test_unknown_option_fails_at_construction() -> None:
    from specialists.base import OptionsError, validate_options

    with pytest.raises(TypeError):
        RetrievalSpecialist(embeder="static")  # type: ignore[call-arg]
    with pytest.raises(OptionsError, match="embeder: unknown option"):
        validate_options(RetrievalSpecialist, {"embeder": "static"})
    with pytest.raises(OptionsError, match="max_chunk_char"):
        RetrievalSpecialist(index={"max_chunk_char": 3})


def test_http_index_then_retrieve(client: TestClient, repo: Path) -> None:
    r = client.post("/v1/index", json={"path": str(repo)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["chunks_total"] > 0 and body["files_added"] >= 8
    r = client.post("/v1/retrieve", json={"query": "parse config file", "k": 3,
                                          "filters": {"language": "python"}})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results and all(x["language"] == "python" for x in results)
    top = results[0]
    assert {"path", "start_line", "end_line", "symbol", "score", "retriever"} <= set(top)
    assert "parse_config_file" in top["symbol"] and top["retriever"] in ("bm25", "dense", "both")
    again = client.post("/v1/index", json={"path": "repo"}).json()  # relative to the root
    assert again["chunks_embedded"] == 0 and again["files_read"] == 0


@pytest.mark.parametrize("path", ["../../etc", "/etc", "repo/../../x"])
def test_http_index_outside_root_is_403(client: TestClient, path: str) -> None:
    r = client.post("/v1/index", json={"path": path})
    assert r.status_code == 403
    assert r.json()["error"]["type"] == "permission_error"


def test_http_symlink_escape_is_403(client: TestClient, repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.mkdir()
    (repo.parent / "sneaky").symlink_to(target)
    assert client.post("/v1/index", json={"path": "sneaky"}).status_code == 403


def test_specialist_answer_abstains_without_hits(spec: RetrievalSpecialist, repo: Path) -> None:
    spec.index_repo(str(repo))
    assert not spec.answer({"query": "parse config file"}).abstained
    result = spec.answer({"query": "config", "filters": {"language": "cobol"}})
    assert result.abstained and result.reason


def test_cli_index_and_search(tmp_path: Path, repo: Path, capsys) -> None:
    from router.commands.retrieval import main

    common = ["--index-dir", str(tmp_path / "ix"), "--embedder", "hash:64"]
    assert main(["index", str(repo), "--quiet", *common]) == 0
    assert "chunks from" in capsys.readouterr().out
    assert main(["search", "server start", "--repo", str(repo), "--json", "-k", "2",
                 "--language", "go", *common]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and hits[0]["language"] == "go"
    assert main(["search", "x", "--repo", str(tmp_path), *common]) == 1


def test_registered_in_the_complement_cli() -> None:
    import argparse

    from router.commands.retrieval import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["retrieval", "finetune", "--max-seconds", "5"])
    assert args.func.__name__ == "cmd_finetune" and args.max_seconds == 5


def test_server_is_ready_while_the_embedder_loads(tmp_path: Path, repo: Path) -> None:
    import threading


    s = RetrievalSpecialist(allowed_root=str(repo.parent), index_dir=str(tmp_path / "ix"),
                            embedder="hash:64")
    gate = threading.Event()
    s._loader = threading.Thread(target=gate.wait, daemon=True)
    s._loader.start()
    health = s.health()
    assert health["ok"] and health["loading"]
    with pytest.raises(UnavailableError, match="still loading"):
        s.index_repo(str(repo))
    gate.set()
    s._loader.join()
