"""The HTTP transport for OpenAI-compatible servers: which models take it, what it sends,
and how its failures map onto the same error table as litellm's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from router.config import parse_config
from router.frontier import ERROR_TABLE, FrontierClient, classify, message_text, retry_after_s
from router.transport import STATUS_ROWS, ProviderError, error_for
from tests.fakes.fake_frontier import FakeFrontier

MSG = [{"role": "user", "content": "hello"}]


def once(c: FrontierClient, *args: Any) -> Any:
    """One ``complete`` call on a fresh loop, its connections closed after."""
    async def run() -> Any:
        try:
            return await c.complete(*args)
        finally:
            await c.aclose()

    return asyncio.run(run())


def frontier(fake: FakeFrontier, **model: object) -> FrontierClient:
    cfg = parse_config({
        "frontier": {"retry": {"attempts": 1}},
        "models": {"m": {"model": "openai/served-name", "api_base": fake.url, "api_key": "k",
                         **model}}}, env={})
    return FrontierClient(cfg.models, cfg.frontier)


@pytest.mark.parametrize(("model", "expected"), [
    ({"model": "openai/qwen", "api_base": "http://127.0.0.1:1/v1"}, True),
    ({"model": "openai/gpt-5"}, False),  # hosted OpenAI: litellm knows its parameter rules
    ({"model": "anthropic/claude-haiku-4-5", "api_base": "http://x/v1"}, False),
    ({"model": "openai/qwen", "api_base": "http://x/v1", "transport": "litellm"}, False),
    ({"model": "openai/gpt-5", "transport": "http"}, True),
])
def test_which_models_go_straight_over_http(model: dict, expected: bool) -> None:
    cfg = parse_config({"models": {"m": model}}, env={})
    assert cfg.models["m"].speaks_http() is expected


def test_sends_the_request_as_given(fake: FakeFrontier) -> None:
    c = frontier(fake, params={"temperature": 0.1, "extra_headers": {"x-team": "blue"}})
    result = once(c, "m", MSG, {"top_k": 5, "seed": 7})
    assert message_text(result.response) == "echo: hello"
    body, headers = fake.requests[-1], fake.headers[-1]
    assert body["model"] == "served-name"  # the provider's own name, prefix removed
    assert body["messages"] == MSG
    assert (body["temperature"], body["top_k"], body["seed"]) == (0.1, 5, 7)
    assert "extra_headers" not in body and headers["x-team"] == "blue"
    assert headers["authorization"] == "Bearer k"


def test_one_client_serves_several_event_loops(fake: FakeFrontier) -> None:
    c = frontier(fake)
    for _ in range(2):  # each run is a new loop; pools are per loop
        assert message_text(once(c, "m", MSG).response) == "echo: hello"


@pytest.mark.parametrize(("behaviour", "row"), [
    ("429", "RateLimitError"), ("500", "InternalServerError"), ("502", "BadGatewayError"),
    ("503", "ServiceUnavailableError"), ("401", "AuthenticationError"),
    ("malformed", "APIResponseValidationError"),
    ("truncated", "APIConnectionError"),  # the body stops short of its Content-Length
])
def test_failures_name_their_row(fake: FakeFrontier, behaviour: str, row: str) -> None:
    fake.push(behaviour)
    with pytest.raises(ProviderError) as info:
        once(frontier(fake), "m", MSG)
    assert info.value.row == row
    assert classify(info.value) is ERROR_TABLE[row]


def test_a_stream_cut_off_before_done_raises(fake: FakeFrontier) -> None:
    fake.push("truncated")

    async def run() -> None:
        c = frontier(fake)
        try:
            handle = await c.open_stream("m", [{"role": "user", "content": "a b c d e f"}])
            assert handle.first["choices"][0]["delta"]["role"] == "assistant"
            async for _ in handle.rest:
                pass
        finally:
            await c.aclose()

    with pytest.raises(ProviderError, match="before \\[DONE\\]") as info:
        asyncio.run(run())
    assert classify(info.value).retry


def test_unreachable_provider_is_a_connection_error() -> None:
    cfg = parse_config({"frontier": {"retry": {"attempts": 1}},
                        "models": {"m": {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1",
                                         "requires_key": False}}}, env={})
    with pytest.raises(ProviderError) as info:
        once(FrontierClient(cfg.models, cfg.frontier), "m", MSG)
    assert info.value.row == "APIConnectionError"


def test_every_status_row_is_in_the_table() -> None:
    assert set(STATUS_ROWS.values()) <= set(ERROR_TABLE)


@pytest.mark.parametrize(("status", "body", "row"), [
    (400, b'{"error": {"message": "This model\'s maximum context length is 8192 tokens"}}',
     "ContextWindowExceededError"),
    (400, b'{"error": {"message": "unknown parameter", "code": "x"}}', "BadRequestError"),
    (418, b"teapot", "BadRequestError"),
    (599, b"", "APIError"),
    (429, b'{"error": "slow down"}', "RateLimitError"),
])
def test_status_and_message_decide_the_row(status: int, body: bytes, row: str) -> None:
    error = error_for(status, body, {"retry-after": "2"})
    assert error.row == row and str(error).startswith(f"HTTP {status}")
    assert retry_after_s(error) == 2.0
