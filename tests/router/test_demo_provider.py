"""The offline demo provider (issue 40): the default config's ``demo`` route, served by
``complement demo-provider``, answers chat and ``/v1/edit`` with no key and no network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from router.app import create_app
from router.config import interpolate, parse_config, read_yaml
from router.demo_provider import DemoProvider
from tests.conftest import running

REPO = Path(__file__).resolve().parents[2]
APP = 'def greet(name):\n    return "hello " + name\n'


def demo_config(url: str, data_dir: Path) -> Any:
    """configs/default.yaml as shipped, less the specialists that load models (Tab and the
    retriever: not what this is about), with the demo provider at ``url``."""
    raw = interpolate(read_yaml(REPO / "configs" / "default.yaml", "config"),
                      env={"COMPLEMENT_DEMO_URL": url, "COMPLEMENT_DATA_DIR": str(data_dir)})
    raw["specialists"] = {"apply": raw["specialists"]["apply"]}
    return parse_config(raw, env={})


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[str]:
    provider = DemoProvider(default="demo").start()  # as `complement demo-provider` serves it
    try:
        with running(create_app(demo_config(provider.url, tmp_path))) as base:
            yield base
    finally:
        provider.stop()


def test_openai_sdk_chats_through_the_demo_route_without_a_key(demo_server: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{demo_server}/v1", api_key="unused-on-loopback")
    reply = client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "echo: hi"
    assert reply.model_extra["complement"]["route"] == "demo"
    stream = client.chat.completions.create(model="demo", stream=True,
                                            messages=[{"role": "user", "content": "hi there"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "echo: hi there"
    models = httpx.get(f"{demo_server}/v1/models").json()["data"]
    assert next(m for m in models if m["id"] == "demo")["live"] is True


def test_edit_through_the_demo_route_applies_a_marked_file(demo_server: str) -> None:
    r = httpx.post(f"{demo_server}/v1/edit", json={
        "instruction": "make greet say hi", "route": "demo", "texts": {"app.py": APP}}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "applied", body
    assert body["files"]["app.py"] == "# demo provider: make greet say hi\n" + APP
    assert "+# demo provider: make greet say hi" in body["diff"]


def test_the_command_serves_it() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "demo-provider", "--port", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("demo provider on http://127.0.0.1:"), line
        url = line.split()[3]
        answer = httpx.post(f"{url}/chat/completions", json={
            "model": "demo", "messages": [{"role": "user", "content": "hello"}]}, timeout=10)
        assert answer.json()["choices"][0]["message"]["content"] == "echo: hello"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("fmt", ["sketch", "search_replace", "whole_file"])
@pytest.mark.parametrize("model", ["openai/demo", "anthropic/claude-demo"])
def test_the_demo_edit_answers_in_the_format_asked(fmt: str, model: str) -> None:
    from router.demo_provider import answer_text
    from router.edit.planning import build_messages, merge_search_replace, sketch_bodies

    files = {"app.py": APP, "util.py": "X = 1\n"}
    messages = build_messages("make greet say hi", files, ["```python ctx.py\nY = 2\n```\n"], fmt, model)
    answer = answer_text({"messages": messages}, "demo")
    want = "# demo provider: make greet say hi\n" + APP
    if fmt == "search_replace":
        merged, why, _ = merge_search_replace(answer, files)
        assert why is None and merged == {"app.py": want}
    else:
        assert sketch_bodies(answer, files) == [("app.py", want)]
    assert answer_text({"messages": messages}, "ok").startswith("echo: ")  # only `demo` edits
