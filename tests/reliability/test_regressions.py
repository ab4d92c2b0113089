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
