"""The running app (uvicorn on loopback) with the official openai SDK as the client."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from router.app import create_app
from router.config import parse_config
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier


def make_config(fake: FakeFrontier, data_dir: Path, **server: Any) -> Any:
    return parse_config(config_data(fake, data_dir, **server), env={})


def config_data(fake: FakeFrontier, data_dir: Path, **server: Any) -> dict[str, Any]:
    """The suite's config as YAML data (tests/router/test_ray_engine.py serves it on Ray)."""
    return {
        "server": {"max_body_bytes": 20_000, **server},
        "data_dir": str(data_dir),
        "frontier": {"retry": {"attempts": 3, "backoff_initial_s": 0.01, "backoff_max_s": 0.02},
                     "circuit": {"failure_threshold": 50}},
        "models": {
            "small": {"model": "openai/fake-small", "api_base": fake.url, "api_key": "k",
                      "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
            "big": {"model": "openai/fake-big", "api_base": fake.url, "api_key": "k",
                    "input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5},
            "keyless": {"model": "openai/gpt-5", "api_key": "${OPENAI_API_KEY:-}"},
        },
        "routes": {
            "fast": {"targets": ["small", "big"]},
            "auto": {"policy": "cascade", "targets": ["local", "small", "big"],
                     "verify": [{"kind": "regex", "pattern": "^echo: .*ok"}]},
            "json": {"policy": "cascade", "targets": ["small", "big"],
                     "verify": [{"kind": "json"}]},
            "nokey": {"targets": ["keyless"]},
            "cheap": {"targets": ["big"], "budget": {"max_cost_usd": 0.001}},
        },
        "specialists": {"local": {"class": "tests.router.swap_specialists:Abstainer"}},
    }


@pytest.fixture
def base(fake: FakeFrontier, tmp_path: Path) -> Iterator[str]:
    with running(create_app(make_config(fake, tmp_path))) as url:
        yield url


def sdk(base: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=30)


def test_sdk_completion_carries_route_model_cost_latency(base: str) -> None:
    raw = sdk(base).chat.completions.with_raw_response.create(
        model="fast", messages=[{"role": "user", "content": "hello"}])
    assert raw.headers["x-complement-route"] == "fast"
    assert raw.headers["x-complement-model"] == "small"
    assert float(raw.headers["x-complement-cost-usd"]) > 0
    assert float(raw.headers["x-complement-latency-ms"]) > 0
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello"
    assert completion.model == "small"
    extra = completion.model_extra["complement"]
    assert extra["route"] == "fast" and extra["model"] == "small"
    assert extra["provider_model"] == "openai/fake-small"
    usage = completion.usage
    assert extra["cost_usd"] == pytest.approx(usage.prompt_tokens * 1e-6
                                              + usage.completion_tokens * 2e-6)
    assert extra["trace"][0]["outcome"] == "ok"


def test_streaming_passes_through_intact(base: str, fake: FakeFrontier) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    stream = sdk(base).chat.completions.create(
        model="fast", stream=True, messages=[{"role": "user", "content": text}],
        stream_options={"include_usage": True})
    parts, summary, usage = [], None, None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
        if (chunk.model_extra or {}).get("complement"):
            summary = chunk.model_extra["complement"]
    assert "".join(parts) == f"echo: {text}"
    assert usage is not None and usage.completion_tokens > 0
    assert summary["route"] == "fast" and summary["model"] == "small"
    assert summary["cost_usd"] > 0
    assert fake.requests[-1]["stream"] is True


def test_streaming_falls_back_before_first_byte(base: str, fake: FakeFrontier) -> None:
    fake.push("500", "500", "500")
    with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json={
            "model": "fast", "stream": True,
            "messages": [{"role": "user", "content": "x y"}]}) as r:
        assert r.headers["x-complement-model"] == "big"
        body = r.read().decode()
    assert "echo:" in body and body.rstrip().endswith("data: [DONE]")


def test_mid_stream_break_is_reported_in_band(base: str, fake: FakeFrontier) -> None:
    fake.push("truncated")
    with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30, json={
            "model": "fast", "stream": True,
            "messages": [{"role": "user", "content": "one two three four five six"}]}) as r:
        body = r.read().decode()
    assert '"error"' in body
    assert body.rstrip().endswith("data: [DONE]")


def test_fallback_to_second_model(base: str, fake: FakeFrontier) -> None:
    fake.push("500", "500", "500")
    completion = sdk(base).chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "hi"}])
    trace = completion.model_extra["complement"]["trace"]
    assert [t["target"] for t in trace] == ["small", "big"]
    assert trace[0]["outcome"] == "error" and trace[0]["tries"] == 3
    assert completion.model == "big"


def test_cascade_escalates_on_abstain_and_verifier(base: str, fake: FakeFrontier) -> None:
    completion = sdk(base).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "not good"}])
    trace = completion.model_extra["complement"]["trace"]
    assert [t["outcome"] for t in trace] == ["abstained", "rejected", "ok"]
    assert "does not match" in trace[1]["reason"]
    assert "verifier rejected" in trace[2]["reason"]  # the last target's answer stands
    fake.push("text:{\"a\": 1}")
    ok = sdk(base).chat.completions.create(model="json",
                                           messages=[{"role": "user", "content": "j"}])
    assert ok.model == "small" and ok.choices[0].message.content == '{"a": 1}'


def test_budget_skips_targets_that_could_overspend(base: str) -> None:
    r = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
        "model": "cheap", "max_tokens": 1000, "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 402
    assert "exceeds the route budget" in r.json()["error"]["message"]
    ok = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
        "model": "cheap", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    assert ok.status_code == 200


def test_route_without_key_answers_503_naming_the_variable(base: str) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        sdk(base).chat.completions.create(model="nokey",
                                          messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 503
    assert "OPENAI_API_KEY" in str(info.value) and "models.keyless.api_key" in str(info.value)


@pytest.mark.parametrize("body, status, needle", [
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "empty"),
    (b'{"model": "fast", "messages": "hi"}', 400, "messages"),
    (b'{"model": 3, "messages": [{"role": "user", "content": "x"}]}', 400, "model"),
    (b'{"model": "fast", "messages": []}', 400, "at least 1"),
    (b'{"model": "fast", "messages": [{"role": "robot", "content": "x"}]}', 400, "role"),
    (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404,
     "unknown route 'nope'"),
    # past 64 bits orjson reads a float; once a 502 from the provider call (schemathesis)
    (b'{"model": "fast", "max_tokens": 571376629924752605052928, '
     b'"messages": [{"role": "user", "content": "x"}]}', 400, "max_tokens"),
    (b'{"model": "fast", "max_completion_tokens": 9007199254740992, '
     b'"messages": [{"role": "user", "content": "x"}]}', 400, "max_completion_tokens"),
])
def test_bad_input_gets_openai_error_shape(base: str, body: bytes, status: int,
                                           needle: str) -> None:
    r = httpx.post(f"{base}/v1/chat/completions", content=body,
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert needle in error["message"]
    # and the server keeps serving
    assert httpx.get(f"{base}/healthz").status_code == 200


def test_body_over_limit_is_413(base: str) -> None:
    big = "x" * 30_000
    r = httpx.post(f"{base}/v1/chat/completions", timeout=30,
                   json={"model": "fast", "messages": [{"role": "user", "content": big}]})
    assert r.status_code == 413
    assert "server.max_body_bytes" in r.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no content-length: counted as it arrives
        yield b'{"model": "fast", "messages": [{"role": "user", "content": "'
        for _ in range(30):
            yield b"y" * 1000
        yield b'"}]}'

    r = httpx.post(f"{base}/v1/chat/completions", content=chunks(), timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_models_health_ready_metrics(base: str) -> None:
    models = sdk(base).models.list()
    by_id = {m.id: m for m in models.data}
    assert {"fast", "auto", "nokey"} <= set(by_id)
    assert by_id["fast"].model_extra["live"] is True
    assert by_id["nokey"].model_extra["live"] is False
    assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{base}/readyz").status_code == 200
    sdk(base).chat.completions.create(model="fast", messages=[{"role": "user", "content": "m"}])
    text = httpx.get(f"{base}/metrics").text
    assert 'complement_requests_total{model="small",route="fast",status="200"}' in text
    assert "complement_request_latency_seconds_bucket" in text
    assert 'complement_cost_usd_total{model="small",route="fast"}' in text
    assert httpx.get(f"{base}/nowhere").json()["error"]["type"] == "not_found_error"


def test_api_keys(fake: FakeFrontier, tmp_path: Path) -> None:
    config = make_config(fake, tmp_path, api_keys=["secret-1", "secret-2"])
    with running(create_app(config)) as url:
        msg = [{"role": "user", "content": "x"}]
        with pytest.raises(openai.AuthenticationError) as info:
            sdk(url, "wrong").chat.completions.create(model="fast", messages=msg)
        assert "server.api_keys" in str(info.value)
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "fast", "messages": msg})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        ok = sdk(url, "secret-2").chat.completions.create(model="fast", messages=msg)
        assert ok.choices[0].message.content == "echo: x"
        assert httpx.get(f"{url}/healthz").status_code == 200  # probes stay open


def test_non_loopback_without_keys_is_refused() -> None:
    from router.errors import ConfigError

    with pytest.raises(ConfigError, match="api_keys"):
        parse_config({"server": {"host": "0.0.0.0"}}, env={})
