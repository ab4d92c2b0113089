"""F1: a chat request's fields must not redirect the provider call or carry the key away.

Two models are configured: ``leak`` (``openai/gpt-5`` through litellm, the key
``sk-CANARY-…``, no ``api_base``: the shape that leaked) and ``plain`` (the fake provider,
straight over HTTP, the key ``sk-PLAIN-…``). A canary listener stands where a client would
point the call. Each connection field is sent on each route, streamed and not; every
request the canary receives is a leak (a forgery to the client's URL; with the key, the
key's loss), and so is a header a client injects into the real provider's request. Each
refused field must be a 400 naming it. A request with model parameters only must still
reach the provider with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from router.audit.common import Tally, serve

CANARY_KEY = "sk-CANARY-f1-0123456789"
PLAIN_KEY = "sk-PLAIN-f1-0123456789"


def attacks(canary_url: str) -> list[tuple[str, Any]]:
    """(field, value) pairs a client could use to move the call or what goes with it."""
    return [
        ("api_base", canary_url), ("base_url", canary_url), ("api_key", "sk-client"),
        ("extra_headers", {"X-Injected": "1"}), ("headers", {"X-Injected": "1"}),
        ("extra_body", {"api_base": canary_url}), ("extra_query", {"x": "1"}),
        ("custom_llm_provider", "openai"), ("api_version", "2024-01-01"),
        ("organization", "org-x"), ("callbacks", ["langfuse"]),
        ("success_callback", ["langfuse"]), ("mock_response", "pwned"),
        ("input_cost_per_token", 0), ("timeout", 0.001), ("num_retries", 50),
        ("fallbacks", [{"model": "x", "api_base": canary_url}]),
        ("client", "x"), ("not_a_parameter", 1),
    ]


def config(fake_url: str, data_dir: Path) -> dict[str, Any]:
    return {
        # its own event store: an audit never opens the operator's (~/.complement)
        "data_dir": str(data_dir),
        "frontier": {"retry": {"attempts": 1}},
        "models": {
            "leak": {"model": "openai/gpt-5", "api_key": CANARY_KEY, "timeout_s": 5},
            "plain": {"model": "openai/fake", "api_base": fake_url, "api_key": PLAIN_KEY,
                      "transport": "http", "timeout_s": 5},
        },
        "routes": {"leakroute": {"policy": "fixed", "targets": ["leak"]},
                   "plainroute": {"policy": "fixed", "targets": ["plain"]}},
    }


def probe(tmp: Path) -> Tally:
    from router.demo_provider import DemoProvider

    tally = Tally("F1 provider redirect")
    canary, fake = DemoProvider().start(), DemoProvider().start()
    try:
        with serve(config(fake.url, tmp / "data")) as url, httpx.Client(base_url=url, timeout=30) as client:
            for route in ("leakroute", "plainroute"):
                for stream in (False, True):
                    for field, value in attacks(canary.url):
                        tally.attempts += 1
                        seen = len(fake.headers)
                        body = {"model": route, "stream": stream, field: value,
                                "messages": [{"role": "user", "content": "hi"}]}
                        r = client.post("/v1/chat/completions", json=body)
                        param = (_json(r).get("error") or {}).get("param")
                        tally.expect(r.status_code == 400 and param == field,
                                     f"{route} stream={stream} {field}: {r.status_code} "
                                     f"param={param!r}")
                        injected = [h for h in fake.headers[seen:] if "x-injected" in h]
                        tally.leaks += len(injected)
            tally.leaks += len(canary.requests)
            # model parameters still reach the provider
            seen = len(fake.requests)
            r = client.post("/v1/chat/completions", json={
                "model": "plainroute", "temperature": 0.25, "max_tokens": 7,
                "messages": [{"role": "user", "content": "hi"}]})
            sent = fake.requests[seen:]
            tally.expect(r.status_code == 200 and len(sent) == 1
                         and sent[0].get("temperature") == 0.25
                         and sent[0].get("max_tokens") == 7,
                         f"model parameters did not reach the provider: {r.status_code}")
    finally:
        canary.stop()
        fake.stop()
    return tally


def _json(r: httpx.Response) -> dict[str, Any]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
