"""Bugs ``benchmarks/reliability.py`` found, one test each, in the layer that was fixed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from router.config import parse_config
from router.frontier import FrontierClient
from router.transport import ProviderError
from tests.fakes.fake_frontier import FakeFrontier


def _client(fake: FakeFrontier, transport: str) -> FrontierClient:
    cfg = parse_config({
        "frontier": {"retry": {"attempts": 2, "backoff_initial_s": 0.01, "backoff_max_s": 0.02}},
        "models": {"m": {"model": "openai/fake", "api_base": fake.url, "api_key": "k",
                         "transport": transport}}}, env={})
    return FrontierClient(cfg.models, cfg.frontier)


def _first_text(fake: FakeFrontier, transport: str) -> Any:
    async def run() -> Any:
        c = _client(fake, transport)
        try:
            handle = await c.open_stream("m", [{"role": "user", "content": "a b"}])
            return handle.attempts
        finally:
            await c.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("transport", ["litellm", "http"])
def test_a_stream_that_closes_before_saying_anything_is_retried(
        fake: FakeFrontier, transport: str) -> None:
    """faults/empty_body: through litellm an empty SSE body came back as a finished, empty
    answer (200, no fallback); now it is a broken stream, retried, then fallen back from."""
    fake.push("empty")
    assert _first_text(fake, transport) == 2  # the empty one, then the good one
    fake.push("empty", "empty")
    with pytest.raises(ProviderError, match="ended before"):
        _first_text(fake, transport)


@pytest.mark.parametrize("transport", ["litellm", "http"])
def test_an_empty_answer_is_still_an_answer(fake: FakeFrontier, transport: str) -> None:
    fake.push("text:")
    assert _first_text(fake, transport) == 1


# -- the HTTP boundary ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The app with the apply and retrieval specialists, one repository under its root."""
    from router.app import create_app
    from tests.conftest import running

    tmp = tmp_path_factory.mktemp("served")
    (tmp / "repos" / "proj").mkdir(parents=True)
    (tmp / "repos" / "proj" / "a.py").write_text("def f():\n    return 1\n")
    config = parse_config({
        "data_dir": str(tmp / "data"),
        "server": {"max_body_bytes": 20_000, "body_timeout_s": 1.0},
        "workspace": {"allowed_roots": [str(tmp / "repos")]},
        "models": {"m": {"model": "openai/fake", "api_base": "http://127.0.0.1:9/v1",
                         "api_key": "k"}},
        "routes": {"r": {"targets": ["m"]}},
        "specialists": {
            "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
            "retrieval": {"class": "retrieval.specialist:RetrievalSpecialist",
                          "options": {"allowed_root": str(tmp / "repos"), "embedder": "hash:64",
                                      "index_dir": str(tmp / "data" / "indexes")}}}}, env={})
    with running(create_app(config)) as base:
        yield base


def _post(base: str, path: str, raw: bytes) -> Any:
    import httpx

    return httpx.post(f"{base}{path}", content=raw, timeout=30,
                      headers={"content-type": "application/json"})


LONE = "a\ud800b"  # json.dumps writes it as the escape \ud800, as a client would


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/apply", {"original": "def f():\n    return 1\n",
                   "sketch": f"def f():\n    return '{LONE}'\n", "path": "a.py"}),
    ("/v1/apply", {"original": "a\n", "sketch": "b\n", "path": LONE}),
    ("/v1/edit", {"instruction": "x", "route": LONE}),
    ("/v1/edit", {"instruction": "x", "route": "r", "repo": LONE}),
    ("/v1/edit", {"instruction": "x", "route": "r", "repo": "proj", "files": [LONE]}),
    ("/v1/retrieve", {"query": "x", "repo": LONE}),
])
def test_a_lone_surrogate_is_a_400_not_a_500(served: str, path: str, body: Any) -> None:
    """hostile/lone surrogates: the standard library's JSON took them for text and the
    first encode failed (500); the routes FastAPI parses now decode with orjson."""
    import json

    r = _post(served, path, json.dumps(body).encode())
    assert r.status_code == 400, r.text
    assert "not valid JSON" in r.json()["error"]["message"]
    raw = _post(served, path, json.dumps(body).replace("\\ud800", "\udcff").encode(
        "utf-8", "surrogatepass"))  # the surrogate as raw bytes, not escaped
    assert raw.status_code == 400, raw.text


def test_a_blank_instruction_is_refused_by_the_schema_it_publishes(served: str) -> None:
    """schemathesis (CI, fuzzing phase): POST /v1/edit with ``"instruction": "\\r"`` passed
    the published schema (min_length 1) and was refused as empty: the schema now says
    what the server holds, so a blank instruction breaks it and gets the same 400."""
    import json
    import re

    import httpx

    schema = httpx.get(f"{served}/openapi.json", timeout=30).json()
    # a JSON Schema pattern matches anywhere in the string, as re.search does
    pattern = schema["components"]["schemas"]["EditBody"]["properties"]["instruction"]["pattern"]
    for blank in ("\r", " \t\n", "\u3000"):
        assert re.search(pattern, blank) is None, repr(blank)
        r = _post(served, "/v1/edit", json.dumps({"instruction": blank, "route": "r"}).encode())
        assert r.status_code == 400 and r.json()["error"]["param"] == "instruction", r.text
    assert re.search(pattern, " fix it ")


def test_paired_surrogates_are_text(served: str) -> None:
    r = _post(served, "/v1/apply",
              b'{"original": "x = 1\\n", "sketch": "x = \\"\\ud83d\\ude00\\"\\n"}')
    assert r.status_code == 200 and "\U0001F600" in r.json()["files"][0]["merged"]


def test_static_names_the_os_refuses_are_404(served: str) -> None:
    """hostile/GET /static/%00 and a name too long for the OS: ValueError / OSError, 500."""
    import httpx

    for name in ("%00", "a%00b", "a/" * 3000):
        r = httpx.get(f"{served}/static/{name}", timeout=30)
        assert r.status_code == 404, (name[:20], r.text)


def test_a_chunked_body_over_the_limit_is_413_on_every_endpoint(served: str) -> None:
    """hostile/oversized chunked: FastAPI turned the guard's 413 into 'There was an error
    parsing the body' (400) on the endpoints whose bodies it reads."""
    import httpx

    def chunks() -> Any:
        yield b'{"original": "'
        for _ in range(30):
            yield b"y" * 1000
        yield b'"}'

    for path in ("/v1/apply", "/v1/retrieve", "/v1/index", "/v1/edit"):
        r = httpx.post(f"{served}{path}", content=chunks(), timeout=30,
                       headers={"content-type": "application/json"})
        assert r.status_code == 413, (path, r.text)


def test_a_body_that_stalls_is_408_not_a_held_connection(served: str) -> None:
    """hostile/content-length lies: a client that sends part of its body and waits held the
    request forever; now the server answers 408 after server.body_timeout_s."""
    import socket
    import time
    from urllib.parse import urlsplit

    port = urlsplit(served).port
    for path in ("/v1/apply", "/v1/chat/completions"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"Content-Length: 100\r\n\r\n{{\"orig".encode())
            started = time.monotonic()
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"server.body_timeout_s" in answer
            assert time.monotonic() - started < 5


def test_an_unknown_edit_route_outside_latin_1_is_404(served: str) -> None:
    """fuzz/POST /v1/edit: the route a request named went into the x-complement-route
    header before it was checked; a name outside Latin-1 made the header fail (500), and
    any name became a metrics label. Only a configured route is recorded now."""
    import httpx

    r = httpx.post(f"{served}/v1/edit", json={"instruction": "x", "route": "модель-\U00031d01"},
                   timeout=30)
    assert r.status_code == 404 and r.headers["x-complement-route"] == "edit", r.text
    metrics = httpx.get(f"{served}/metrics", timeout=30).text
    assert "модель" not in metrics


def test_a_client_that_hangs_up_mid_body_is_499_not_a_logged_500(
        served: str, caplog: pytest.LogCaptureFixture) -> None:
    """hostile/disconnect mid-body: the endpoints that read their own body (chat,
    feedback) logged an unhandled ClientDisconnect as a 500 with its traceback; those FastAPI
    reads counted a 400. It is the client's doing: 499 (nginx's), nothing logged."""
    import logging
    import socket
    import time
    from urllib.parse import urlsplit

    import httpx

    port = urlsplit(served).port
    with caplog.at_level(logging.ERROR):
        for path in ("/v1/chat/completions", "/v1/feedback", "/v1/apply"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                             "application/json\r\nContent-Length: 100\r\n\r\n{\"mo".encode())
                time.sleep(0.2)
        time.sleep(0.5)
    assert not [r for r in caplog.records if "unhandled" in r.getMessage()]
    metrics = httpx.get(f"{served}/metrics", timeout=30).text
    assert 'route="apply",status="499"' in metrics


# -- several server processes on one index directory ----------------------------------------
def _retriever(root: Any, index_dir: Any) -> Any:
    from retrieval.specialist import RetrievalSpecialist

    spec = RetrievalSpecialist(allowed_root=str(root), index_dir=str(index_dir),
                               embedder="hash:64")
    spec.setup()
    spec.wait_ready(60)
    return spec


def test_every_worker_searches_what_any_worker_indexed(tmp_path: Any) -> None:
    """load with --workers 2: /v1/index reached one worker; /v1/retrieve without 'repo' on
    the other answered 503 'no repository is indexed yet', and a worker that had read an
    index kept searching that copy after another worker refreshed it."""
    repo = tmp_path / "repos" / "proj"
    repo.mkdir(parents=True)
    (repo / "a.py").write_text("def alpha():\n    return 'first version'\n")
    one, two = (_retriever(tmp_path / "repos", tmp_path / "indexes") for _ in range(2))
    one.index_repo("proj")
    first = two.retrieve("alpha first version", k=3)  # no repo: the last one indexed
    assert first["repo"] == str(repo.resolve()) and first["results"]
    (repo / "b.py").write_text("def beta():\n    return 'added later'\n")
    one.index_repo("proj")
    paths = {hit["path"] for hit in two.retrieve("beta added later", k=5)["results"]}
    assert "b.py" in paths
