"""One request-validation policy for every endpoint (issue 40): an unknown field is refused
with the nearest known name; every problem is listed; ``param`` is always set; a body that
is not UTF-8 or not JSON reads the same everywhere; a missing content type says what to
send. The real app over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from router.app import create_app
from router.config import parse_config
from tests.conftest import running

# each endpoint: a body that validates, the field to misspell, and its misspelling
ENDPOINTS: dict[str, tuple[dict[str, Any], str, str]] = {
    "/v1/tab": ({"file": "def f():\n    ret", "cursor": 16}, "language", "langauge"),
    "/v1/apply": ({"original": "a = 1\n", "sketch": "a = 2\n"}, "sketch", "skecth"),
    "/v1/index": ({"path": "REPO"}, "path", "pth"),
    "/v1/retrieve": ({"query": "add", "repo": "REPO"}, "query", "qeury"),
    "/v1/edit": ({"instruction": "x", "repo": "REPO"}, "instruction", "instructions"),
    "/v1/chat/completions": ({"model": "chat", "messages": [{"role": "user", "content": "hi"}]},
                             "model", "modle"),
    "/v1/feedback": ({"request_id": "r1", "outcome": "accepted"}, "outcome", "outcom"),
    "/v1/tab/deploy": ({"version": 1}, "version", "verison"),
    "/v1/tab/canary": ({"version": 1, "share": 0.1}, "share", "shares"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("validation")
    repo = root / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    cfg = parse_config({
        "data_dir": str(root / "data"),
        "specialists": {
            "tab": {"class": "specialists.tab:TabSpecialist"},
            "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
            "retrieval": {"class": "retrieval.specialist:RetrievalSpecialist",
                          "options": {"allowed_root": str(root), "embedder": "static"}}},
        "models": {"m": {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1",
                         "api_key": "k"}},
        "routes": {"chat": {"targets": ["m"]}}}, env={})
    with running(create_app(cfg)) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield {"client": client, "repo": str(repo)}


def _body(world: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {k: world["repo"] if v == "REPO" else v for k, v in body.items()}


def _error(r: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    error: dict[str, Any] = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"], error
    return error


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_misspelt_field_is_refused_naming_the_right_one(world: dict[str, Any],
                                                          path: str) -> None:
    body, field, typo = ENDPOINTS[path]
    sent = _body(world, body)
    sent[typo] = sent.pop(field) if path != "/v1/tab" else "python"
    error = _error(world["client"].post(path, json=sent))
    assert f"did you mean {field!r}" in error["message"], error
    assert typo in error["message"]


REQUIRED = {"/v1/tab": "file", "/v1/index": "path", "/v1/retrieve": "query",
            "/v1/edit": "instruction", "/v1/feedback": "outcome", "/v1/tab/deploy": "version",
            "/v1/tab/canary": "share"}
"""A field each endpoint's schema requires (``/v1/apply``'s two forms are checked after)."""


@pytest.mark.parametrize("path", REQUIRED)
def test_every_problem_is_listed_and_param_is_the_first(world: dict[str, Any],
                                                        path: str) -> None:
    """A required field missing and an unknown one: both named, not '(and 1 more)'."""
    body, field = ENDPOINTS[path][0], REQUIRED[path]
    sent = {k: v for k, v in _body(world, body).items() if k != field}
    sent["zzz_unknown"] = 1
    error = _error(world["client"].post(path, json=sent))
    assert "problems:" in error["message"] and "zzz_unknown: unknown field" in error["message"]
    assert f"{field}: Field required" in error["message"], error
    assert "more problems" not in error["message"]
    assert error["param"] == field


def test_chat_lists_every_problem_too(world: dict[str, Any]) -> None:
    error = _error(world["client"].post("/v1/chat/completions", json={"stream": True}))
    assert error["message"].startswith("2 problems:"), error
    assert "model: Field required" in error["message"]
    assert "messages: Field required" in error["message"]
    assert error["param"] == "model"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_bytes_that_are_not_utf8_read_the_same_everywhere(world: dict[str, Any],
                                                          path: str) -> None:
    r = world["client"].post(path, content=b'{"file": "\xff"}',
                             headers={"content-type": "application/json"})
    error = _error(r)
    assert error["message"].startswith("the request body is not valid JSON: ") and \
        "not valid UTF-8" in error["message"], error
    assert error["param"] == "body"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_that_is_not_an_object_says_to_send_one(world: dict[str, Any],
                                                       path: str) -> None:
    error = _error(world["client"].post(path, json=[1, 2]))
    assert error["param"] == "body", error


@pytest.mark.parametrize("path", ENDPOINTS)
def test_curl_d_without_a_content_type_gets_the_header_to_send(world: dict[str, Any],
                                                               path: str) -> None:
    """What ``curl -d '{...}'`` sends: a form content type."""
    r = world["client"].post(path, content=b'{"a": 1}',
                             headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415, r.text
    assert "curl -H 'content-type: application/json'" in r.json()["error"]["message"]


def test_a_cursor_outside_the_file_names_cursor(world: dict[str, Any]) -> None:
    error = _error(world["client"].post("/v1/tab", json={"file": "ab", "cursor": 9}))
    assert error["param"] == "cursor" and "0..2" in error["message"], error


def test_a_nested_unknown_field_is_named_with_its_place(world: dict[str, Any]) -> None:
    r = world["client"].post("/v1/tab", json={
        "file": "x = 1\n", "cursor": 3, "recent_edits": [{"old": "", "nwe": "x"}]})
    error = _error(r)
    assert "recent_edits.0.TabEdit.nwe: unknown field" in error["message"], error
    assert "did you mean 'new'" in error["message"]


def test_the_ghost_text_clients_still_validate(world: dict[str, Any], tmp_path: Path) -> None:
    """What the LSP server, the playground and tab_load send is accepted as it is."""
    body = {"file": "def f():\n    ret", "cursor": 16, "language": "python",
            "path": "playground.py", "session": "s", "seq": 1,
            "recent_edits": [{"old": "", "new": "r", "offset": 13}, "@@ -1 +1 @@\n-a\n+b\n"]}
    r = world["client"].post("/v1/tab", json=body)
    assert r.status_code == 200, r.text
