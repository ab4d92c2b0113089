"""F1 (issue 41): a chat request cannot point the provider call elsewhere, nor send the
server's key with it. The real server over HTTP, a canary listener where a client points."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from router.audit import f1_provider_redirect as f1
from router.config import parse_config
from router.errors import ConfigError
from router.frontier import FrontierClient
from tests.fakes.fake_frontier import FakeFrontier


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from router.audit.common import serve

    canary, fake = FakeFrontier().start(), FakeFrontier().start()
    try:
        with serve(f1.config(fake.url, tmp_path_factory.mktemp("f1-data"))) as url:
            yield {"url": url, "canary": canary, "fake": fake}
    finally:
        canary.stop()
        fake.stop()


def _chat(world: dict[str, Any], route: str, stream: bool, **fields: Any) -> httpx.Response:
    body = {"model": route, "stream": stream,
            "messages": [{"role": "user", "content": "hi"}], **fields}
    return httpx.post(world["url"] + "/v1/chat/completions", json=body, timeout=30)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("field", ["api_base", "base_url"])
def test_a_client_url_is_refused_and_the_key_stays_home(world: dict[str, Any], field: str,
                                                         stream: bool) -> None:
    """The reproduction: model openai/gpt-5 with a key and no api_base; the client names a
    listener. Before: the listener got 'Authorization: Bearer sk-CANARY…'."""
    before = len(world["canary"].requests)
    r = _chat(world, "leakroute", stream, **{field: world["canary"].url})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field
    assert "only the server's config decides" in error["message"]
    assert len(world["canary"].requests) == before
    assert not any(f1.CANARY_KEY in str(h) for h in world["canary"].headers)


@pytest.mark.parametrize("field,value", [(f, v) for f, v in f1.attacks("http://127.0.0.1:9/v1")
                                         if f not in ("api_base", "base_url")])
def test_every_connection_field_is_a_400_naming_it(world: dict[str, Any], field: str,
                                                    value: Any) -> None:
    seen = len(world["fake"].requests)
    r = _chat(world, "plainroute", False, **{field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
    assert len(world["fake"].requests) == seen  # nothing reached the provider


def test_model_parameters_still_reach_the_provider(world: dict[str, Any]) -> None:
    seen = len(world["fake"].requests)
    r = _chat(world, "plainroute", False, temperature=0.5, top_p=0.9, seed=3, stop=["\n"],
              max_tokens=9)
    assert r.status_code == 200, r.text
    sent = world["fake"].requests[seen:]
    assert len(sent) == 1
    assert {k: sent[0][k] for k in ("temperature", "top_p", "seed", "stop", "max_tokens")} == \
        {"temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": ["\n"], "max_tokens": 9}
    assert "authorization" in world["fake"].headers[-1]
    assert f1.PLAIN_KEY in world["fake"].headers[-1]["authorization"]


@pytest.mark.parametrize("field,value,says", [
    ("tools", 1.5, "must be an array of objects"),
    ("tools", [{"type": "function"}, "x"], "must be an array of objects"),
    ("stop", ["\n", 3], "a string or an array of strings"),
    ("temperature", True, "must be a number"),
    ("n", 2.5, "must be an integer"),
    ("response_format", "json", "must be an object"),
])
def test_a_model_parameter_of_the_wrong_type_is_a_400_before_the_provider(
        world: dict[str, Any], field: str, value: Any, says: str) -> None:
    """Found by the fuzzer: a 'tools' that was a number reached litellm, which crashed on
    it ('float' object is not iterable) and the client saw a 502 blaming the provider."""
    seen = len(world["fake"].requests)
    r = _chat(world, "plainroute", False, **{field: value})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and says in error["message"], error
    assert len(world["fake"].requests) == seen
    ok = _chat(world, "plainroute", False, **{field: None})  # null: "not set"
    assert ok.status_code == 200, ok.text


def test_the_openai_sdk_extra_body_is_refused(world: dict[str, Any]) -> None:
    """What a client of the real SDK would write to smuggle the field in."""
    import openai

    client = openai.OpenAI(base_url=world["url"] + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="leakroute",
                                       messages=[{"role": "user", "content": "hi"}],
                                       extra_body={"api_base": world["canary"].url})
    assert "api_base" in str(info.value)
    assert len(world["canary"].requests) == 0


def test_the_frontier_client_drops_connection_fields_itself(tmp_path: Path) -> None:
    """The second line: a caller inside the server that skipped the API's check still
    cannot redirect the call (the HTTP transport would turn extra_headers into headers)."""
    canary, fake = FakeFrontier().start(), FakeFrontier().start()
    try:
        cfg = parse_config(f1.config(fake.url, tmp_path), env={})
        client = FrontierClient(cfg.models, cfg.frontier)

        async def call() -> None:
            try:
                await client.complete("plain", [{"role": "user", "content": "hi"}],
                                      {"api_base": canary.url, "temperature": 0.1,
                                       "extra_headers": {"X-Injected": "1"}})
            finally:
                await client.aclose()

        asyncio.run(call())
        assert canary.requests == []
        assert fake.requests[-1].get("temperature") == 0.1
        assert "api_base" not in fake.requests[-1]
        assert "x-injected" not in fake.headers[-1]
    finally:
        canary.stop()
        fake.stop()


def test_an_operator_may_allow_more_model_parameters_but_never_a_connection_field() -> None:
    cfg = parse_config({"frontier": {"allowed_params": ["repetition_penalty"]}}, env={})
    assert cfg.frontier.allowed_params == ["repetition_penalty"]
    with pytest.raises(ConfigError, match="api_base.*may never come from a request"):
        parse_config({"frontier": {"allowed_params": ["api_base"]}}, env={})


def test_probe_counts_no_leak(tmp_path: Path) -> None:
    tally = f1.probe(tmp_path)
    assert tally.attempts >= 70
    assert tally.ok, tally.as_dict()
