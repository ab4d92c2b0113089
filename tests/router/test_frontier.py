"""The frontier client against a real fake provider on loopback, through both transports:
litellm, and straight HTTP for OpenAI-compatible servers (``router.transport``). The same
retries, fallbacks, circuit and costs hold for both."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

import pytest

from router.config import parse_config
from router.errors import CircuitOpen, FrontierError, FrontierRateLimited
from router.frontier import ERROR_TABLE, FrontierClient, classify, litellm_module, message_text
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


TRANSPORTS = ("litellm", "http")


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client(fake: FakeFrontier, transport: str, attempts: int = 3, threshold: int = 5,
           reset: float = 30.0, **model: Any) -> FrontierClient:
    model.setdefault("transport", transport)
    cfg = parse_config({
        "frontier": {"retry": {"attempts": attempts, "backoff_initial_s": 0.01,
                               "backoff_max_s": 0.02, "retry_after_max_s": 2},
                     "circuit": {"failure_threshold": threshold, "reset_after_s": reset}},
        "models": {"m": {"model": "openai/fake-small", "api_base": fake.url, "api_key": "k",
                         "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, **model}},
    }, env={})
    return FrontierClient(cfg.models, cfg.frontier)


def test_every_litellm_exception_is_in_the_table() -> None:
    """Fails when litellm grows an error class we have not decided on."""
    litellm = litellm_module()
    classes = {name for name, obj in inspect.getmembers(litellm.exceptions, inspect.isclass)
               if issubclass(obj, BaseException) and obj.__module__.startswith("litellm")}
    missing = sorted(classes - set(ERROR_TABLE))
    assert not missing, f"add these litellm exceptions to router.frontier.ERROR_TABLE: {missing}"


def test_retry_table_decisions() -> None:
    litellm = litellm_module()
    assert classify(litellm.RateLimitError("x", "openai", "m")).retry
    assert classify(litellm.InternalServerError("x", "openai", "m")).retry
    assert classify(litellm.Timeout("x", "m", "openai")).retry
    assert not classify(litellm.AuthenticationError("x", "openai", "m")).retry
    assert classify(litellm.AuthenticationError("x", "openai", "m")).fallback
    bad = classify(litellm.BadRequestError("x", "m", "openai"))
    assert not bad.retry and not bad.fallback


def test_retries_then_success_with_cost(fake: FakeFrontier, transport: str) -> None:
    fake.push("429", "500")
    result = once(client(fake, transport), "m", MSG)
    assert result.attempts == 3
    assert len(fake.requests) == 3  # litellm's own retries are off: one hit per attempt
    assert message_text(result.response) == "echo: hello"
    usage = result.usage
    expected = usage["prompt_tokens"] * 1e-6 + usage["completion_tokens"] * 2e-6
    assert result.cost_usd == pytest.approx(expected)


def test_gives_up_after_attempts(fake: FakeFrontier, transport: str) -> None:
    fake.push("500", "500", "500", "500")
    with pytest.raises(Exception) as info:
        once(client(fake, transport, attempts=3), "m", MSG)
    assert classify(info.value).retry
    assert len(fake.requests) == 3


def test_non_retryable_error_is_not_retried(fake: FakeFrontier, transport: str) -> None:
    fake.push("401")
    with pytest.raises(Exception) as info:
        once(client(fake, transport), "m", MSG)
    assert classify(info.value) is ERROR_TABLE["AuthenticationError"]
    assert len(fake.requests) == 1


def test_retry_after_is_honoured(fake: FakeFrontier, transport: str) -> None:
    fake.push("429:1")
    t0 = time.monotonic()
    once(client(fake, transport), "m", MSG)
    assert time.monotonic() - t0 >= 0.95
    assert len(fake.requests) == 2


def test_retry_after_beyond_limit_moves_on(fake: FakeFrontier, transport: str) -> None:
    fake.push("429:60")
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        once(client(fake, transport), "m", MSG)
    assert classify(info.value).ours is FrontierRateLimited
    assert time.monotonic() - t0 < 5 and len(fake.requests) == 1


def test_malformed_and_truncated_responses_are_retried(fake: FakeFrontier, transport: str) -> None:
    fake.push("malformed", "truncated")
    result = once(client(fake, transport), "m", MSG)
    assert result.attempts == 3


def test_slow_provider_times_out_per_call(fake: FakeFrontier, transport: str) -> None:
    fake.push("slow:3", "slow:3")
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        once(client(fake, transport, attempts=2, timeout_s=0.5), "m", MSG)
    assert classify(info.value).retry
    assert time.monotonic() - t0 < 2.9


def test_circuit_opens_then_recovers_through_a_probe(fake: FakeFrontier, transport: str) -> None:
    c = client(fake, transport, attempts=1, threshold=3, reset=0.5)

    async def run() -> None:
        fake.push("500", "500", "500")
        for _ in range(3):
            with pytest.raises(Exception):
                await c.complete("m", MSG)
        assert c.breakers["m"].state == "open"
        hits = len(fake.requests)
        with pytest.raises(CircuitOpen, match="circuit is open"):
            await c.complete("m", MSG)
        assert len(fake.requests) == hits  # the open circuit spared the provider
        await asyncio.sleep(0.6)
        assert c.breakers["m"].state == "half-open"
        result = await c.complete("m", MSG)  # the probe succeeds and closes the circuit
        assert message_text(result.response) == "echo: hello"
        assert c.breakers["m"].state == "closed"
        await c.aclose()

    asyncio.run(run())


def test_failed_probe_reopens(fake: FakeFrontier, transport: str) -> None:
    c = client(fake, transport, attempts=1, threshold=1, reset=0.3)

    async def run() -> None:
        fake.push("500", "500")
        with pytest.raises(Exception):
            await c.complete("m", MSG)
        await asyncio.sleep(0.35)
        with pytest.raises(Exception) as info:
            await c.complete("m", MSG)  # probe goes through and fails
        assert not isinstance(info.value, CircuitOpen)
        with pytest.raises(CircuitOpen):
            await c.complete("m", MSG)
        await c.aclose()

    asyncio.run(run())


def test_stream_opens_after_retry(fake: FakeFrontier, transport: str) -> None:
    fake.push("503")

    async def run() -> list[str]:
        c = client(fake, transport)
        handle = await c.open_stream("m", [{"role": "user", "content": "a b c"}])
        parts = [delta(handle.first)]
        async for chunk in handle.rest:
            parts.append(delta(chunk))
        assert handle.attempts == 2
        await c.aclose()
        return parts

    assert "".join(asyncio.run(run())) == "echo: a b c"


def delta(chunk: Any) -> str:
    if isinstance(chunk, dict):
        choices = chunk.get("choices") or [{}]
        return (choices[0].get("delta") or {}).get("content") or ""
    return (chunk.choices[0].delta.content or "") if chunk.choices else ""


def test_missing_key_names_variable(fake: FakeFrontier) -> None:
    cfg = parse_config({"models": {"g": {"model": "openai/gpt-5",
                                         "api_key": "${OPENAI_API_KEY:-}"}}}, env={})
    c = FrontierClient(cfg.models, cfg.frontier, cfg.env_refs)
    assert c.missing_key("g") == "set OPENAI_API_KEY (models.g.api_key)"


def test_cost_map_is_local_and_known_models_priced() -> None:
    cfg = parse_config({"models": {"g": {"model": "openai/gpt-5-mini", "api_key": "k"}}}, env={})
    c = FrontierClient(cfg.models, cfg.frontier)
    prices = c.cost_per_token("g")
    assert prices is not None and prices[0] > 0 and prices[1] > prices[0]


def test_frontier_error_is_ours() -> None:
    assert issubclass(CircuitOpen, FrontierError)
