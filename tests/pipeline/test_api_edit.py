"""POST /v1/edit on a running app (uvicorn on loopback) with the fake frontier."""

from __future__ import annotations

from pathlib import Path

import httpx

from router.app import create_app
from router.replay import search_replace_blocks
from specialists.apply import make_sketch
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier
from tests.pipeline.conftest import AFTER, BEFORE, fake_config, fenced


def test_edit_endpoint_returns_diff_files_and_trace(fake: FakeFrontier, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(BEFORE)
    fake.push("text:prose only, sorry", "text:" + search_replace_blocks(BEFORE, AFTER, "app.py"))
    with running(create_app(fake_config(fake, tmp_path / "data", [tmp_path]))) as base:
        r = httpx.post(f"{base}/v1/edit", json={
            "instruction": "add a docstring to greet", "route": "edit", "repo": str(repo),
            "files": ["app.py"], "write": True}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "applied" and body["format"] == "search_replace"
    assert body["files"]["app.py"] == AFTER and body["diff"].startswith("--- a/app.py")
    assert body["model"] == "fake" and body["mode"] == "real"
    stages = [(s["stage"], s["outcome"], s.get("format")) for s in body["trace"]]
    assert ("apply", "abstained", "sketch") in stages and stages[-1] == ("write", "ok", None)
    assert body["cost_usd"] > 0 and body["output_tokens"] > 0
    assert (repo / "app.py").read_text() == AFTER


def test_edit_endpoint_inline_texts_and_errors(fake: FakeFrontier, tmp_path: Path) -> None:
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    with running(create_app(fake_config(fake, tmp_path / "data"))) as base:
        ok = httpx.post(f"{base}/v1/edit", json={
            "instruction": "doc", "route": "edit", "texts": {"app.py": BEFORE}}, timeout=60)
        unknown = httpx.post(f"{base}/v1/edit", json={"instruction": "x", "route": "nope"})
        no_repo = httpx.post(f"{base}/v1/edit", json={"instruction": "x", "route": "edit",
                                                      "texts": {"a.py": ""}, "write": True})
        bad_strategy = httpx.post(f"{base}/v1/edit", json={
            "instruction": "x", "route": "edit", "texts": {"a.py": ""}, "strategy": "magic"})
    assert ok.status_code == 200 and ok.json()["files"]["app.py"] == AFTER
    assert unknown.status_code == 404 and "nope" in unknown.json()["error"]["message"]
    assert no_repo.status_code == 400 and no_repo.json()["error"]["param"] == "write"
    assert bad_strategy.status_code == 400 and "strategy" in bad_strategy.json()["error"]["message"]


def test_an_edit_route_with_no_key_is_a_503_naming_it_as_chat_says(fake: FakeFrontier,
                                                                   tmp_path: Path) -> None:
    """Issue 40: /v1/edit answered 200 ``"status": "failed"`` where chat answered 503 for
    the same route without a key; a route with one keyed target still edits."""
    cfg = fake_config(fake, tmp_path / "data")
    cfg.routes["keyless-only"] = cfg.routes["fallback"].model_copy(
        update={"targets": ["keyless"]})
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    with running(create_app(cfg)) as base:
        body = {"instruction": "doc", "texts": {"app.py": BEFORE}}
        edit = httpx.post(f"{base}/v1/edit", json={**body, "route": "keyless-only"}, timeout=60)
        chat = httpx.post(f"{base}/v1/chat/completions", timeout=60, json={
            "model": "keyless-only", "messages": [{"role": "user", "content": "hi"}]})
        fallback = httpx.post(f"{base}/v1/edit", json={**body, "route": "fallback"},
                              timeout=60)
    assert edit.status_code == chat.status_code == 503, (edit.text, chat.text)
    assert "keyless" in edit.json()["error"]["message"]
    assert "OPENAI_API_KEY" in edit.json()["error"]["message"]
    assert fallback.status_code == 200 and fallback.json()["files"]["app.py"] == AFTER
