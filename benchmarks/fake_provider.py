"""A fast fake OpenAI-compatible provider for latency benchmarks: a bare ASGI app on uvicorn
(keep-alive, chunked streams), so that at 64 concurrent requests the provider is not what
the numbers measure. It answers every chat completion with "echo: <last user message>",
with the demo provider's own answer and usage functions (``router/demo_provider.py`` is
scriptable and threaded, for tests).

    python benchmarks/fake_provider.py --port 9000      # base URL http://127.0.0.1:9000/v1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the same answers and token counts as the demo provider, so both fakes bill alike
from router.demo_provider import answer_text, usage  # noqa: E402

_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return
    if scope["method"] == "GET":
        await _send(send, 200, orjson.dumps({"object": "list", "data": [{"id": "fake"}]}))
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    body = orjson.loads(raw or b"{}")
    text = answer_text(body, "ok")
    base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body.get("model", "fake")}
    if not body.get("stream"):
        await _send(send, 200, orjson.dumps({
            **base, "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage(body, text)}))
        return
    await send({"type": "http.response.start", "status": 200, "headers": _SSE})
    chunk = {**base, "object": "chat.completion.chunk"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}]}]
    for i, word in enumerate(text.split(" ")):
        piece = word if i == 0 else " " + word
        events.append({**chunk, "choices": [{"index": 0, "finish_reason": None,
                                             "delta": {"content": piece}}]})
    events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**chunk, "choices": [], "usage": usage(body, text)})
    for event in events:
        await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(event)
                    + b"\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


async def _send(send: Any, status: int, data: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON, (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
