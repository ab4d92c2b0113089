"""The README's promise, kept everywhere: every response — every endpoint, a 4xx, a 503,
the guard's own refusals — carries the x-complement-* headers; malformed JSON says where."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest

from router.app import create_app
from router.config import parse_config
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier

HEADERS = ("x-complement-route", "x-complement-model", "x-complement-cost-usd",
           "x-complement-latency-ms")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("headers")
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    fake = FakeFrontier().start()
    config = parse_config({
        "data_dir": str(tmp / "data"),
        "workspace": {"allowed_roots": [str(tmp)]},
        "models": {"fake": {"model": "openai/fake", "api_base": fake.url, "api_key": "k",
                            "input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6},
                   "keyless": {"model": "openai/gpt-5", "api_key": "${NO_SUCH_KEY:-}"}},
        "routes": {"auto": {"targets": ["fake"]}, "closed": {"targets": ["keyless"]}},
        "specialists": {
            "tab": {"class": "specialists.tab:TabSpecialist",
                    "options": {"sample": True, "log_features": True}},
            "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
            "retrieval": {"class": "retrieval.specialist:RetrievalSpecialist",
                          "options": {"allowed_root": str(tmp), "embedder": "hash:64",
                                      "index_dir": str(tmp / "idx")}}}}, env={})
    try:
        with running(create_app(config)) as url:
            yield url
    finally:
        fake.stop()


def _check(r: httpx.Response) -> httpx.Response:
    missing = [h for h in HEADERS if h not in r.headers]
    assert not missing, f"{r.request.method} {r.request.url.path} ({r.status_code}) lacks {missing}"
    float(r.headers["x-complement-latency-ms"])
    return r


def test_every_endpoint_and_error_carries_the_headers(base: str) -> None:
    repo = str(Path(httpx.get(f"{base}/readyz").json()["specialists"]["retrieval"]
                    ["allowed_root"]) / "repo")
    c = httpx.Client(base_url=base, timeout=60)
    for path in ("/healthz", "/readyz", "/v1/models", "/metrics", "/v1/tab/versions",
                 "/docs", "/openapi.json", "/", "/static/app.js", "/v1/dashboard"):
        assert _check(c.get(path)).status_code == 200, path
    chat = _check(c.post("/v1/chat/completions",
                         json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
    assert chat.headers["x-complement-route"] == "auto" and chat.headers["x-complement-model"] == "fake"
    tab = _check(c.post("/v1/tab", json={"file": "def f(x):\n    return x\n\nde", "cursor": 26}))
    assert tab.headers["x-complement-route"] == "tab"
    assert tab.headers["x-complement-model"] == f"TabSpecialist@{tab.json()['policy_version']}"
    apply = _check(c.post("/v1/apply", json={"original": "a = 1\n", "sketch": "a = 2\n"}))
    assert apply.headers["x-complement-model"].startswith("ApplySpecialist@")
    _check(c.post("/v1/index", json={"path": repo}))
    _check(c.post("/v1/retrieve", json={"query": "greet", "repo": repo}))
    edit = _check(c.post("/v1/edit", json={"instruction": "x", "route": "auto",
                                          "texts": {"a.py": "a = 1\n"}}))
    assert edit.headers["x-complement-route"] == "auto"
    # errors: a 4xx from the app, one from validation, a 404, and a 503
    assert _check(c.post("/v1/feedback", json={"request_id": "nope",
                                               "outcome": "accepted"})).status_code == 404
    assert _check(c.post("/v1/tab/deploy", json={"version": 99999})).status_code == 404
    assert _check(c.post("/v1/apply", json={})).status_code == 400
    closed = _check(c.post("/v1/chat/completions", json={
        "model": "closed", "messages": [{"role": "user", "content": "hi"}]}))
    assert closed.status_code == 503 and closed.headers["x-complement-route"] == "chat"


def test_malformed_json_says_line_and_column_and_names_the_body(base: str) -> None:
    """No field is at fault; ``param`` is always set (issue 40), to ``body`` here."""
    for path in ("/v1/apply", "/v1/tab", "/v1/feedback", "/v1/chat/completions"):
        r = _check(httpx.post(f"{base}{path}", content=b'{"original": "x",\n "sketch": }',
                              headers={"content-type": "application/json"}))
        error = r.json()["error"]
        assert r.status_code == 400 and error["param"] == "body", (path, error)
        assert "not valid JSON" in error["message"] and "line 2 column" in error["message"]


def test_missing_fields_are_named_by_their_own_name(base: str) -> None:
    apply = httpx.post(f"{base}/v1/apply", json={}).json()["error"]
    assert apply["param"] == "original" and "original" in apply["message"]
    sketch = httpx.post(f"{base}/v1/apply", json={"original": "x"}).json()["error"]
    assert sketch["param"] == "sketch"
    tab = httpx.post(f"{base}/v1/tab", json={"cursor": 0}).json()["error"]
    assert tab["param"] == "file"


def test_the_page_serves_only_its_own_files(base: str) -> None:
    for path in ("/static/../api/playground.py", "/static/%2e%2e/%2e%2e/pyproject.toml",
                 "/static/..%2f..%2fpyproject.toml", "/static/nope.js"):
        r = httpx.get(f"{base}{path}")
        assert r.status_code == 404, (path, r.status_code)
    dashboard = httpx.get(f"{base}/v1/dashboard").json()
    assert {"routes", "tab"} <= set(dashboard) and "versions" in dashboard["tab"]


def test_the_page_has_an_icon_where_browsers_look(base: str) -> None:
    """Issue 40: /favicon.ico answered 404 in every browser console."""
    r = httpx.get(f"{base}/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    assert r.content.startswith(b"<svg")
    assert 'href="/static/favicon.svg"' in httpx.get(f"{base}/").text
