"""The demo provider: an OpenAI-compatible frontier on 127.0.0.1 that needs no key and no
network, so a newcomer can try chat and ``/v1/edit`` through the gateway (the default
config's ``demo`` route points at it), and the tests and benchmarks have a real HTTP
provider they can script (issue 40).

    complement demo-provider --port 9100     # base URL http://127.0.0.1:9100/v1

It is a real HTTP server (threaded, keep-alive), scriptable per request, in order, with
behaviours:

    demo            ``complement demo-provider``'s default: an edit request (the prompt
                    ``/v1/edit`` sends) gets the first file back with one comment line on
                    top naming the instruction, in the format asked for; anything else
                    is answered as ``ok``
    ok              a normal answer ("echo: <last user message>", or the scripted text)
    text:<TEXT>     answer exactly TEXT
    text64:<B64>    answer exactly the base64-decoded B64 (text with newlines, in a header)
    429[:S]         rate limited, with ``Retry-After: S`` (default 0)
    500 / 502 / 503 a server error
    401             bad key
    slow:<S>        sleep S seconds, then answer ok
    truncated       the body (or the SSE stream) stops half-way
    malformed       200 with a body that is not JSON
    empty           200 with an empty body (a stream: no event at all, then the end)
    no-choices      200 with JSON that is not a completion (no ``choices``)
    html:<CODE>     a proxy's HTML error page with status CODE (e.g. ``html:502``)
    hangup          the connection closes before any answer
    disconnect:<N>  a stream sends N content chunks, then the connection drops
                    (non-streaming: as ``hangup``)
    error-event:<N> a stream sends N content chunks, then an ``error`` event, then [DONE]
    stall:<N>       a stream sends N content chunks, then goes silent (for 30 s), open

When the script is empty, ``default`` is used. A request with an ``X-Fake-Behaviour``
header gets that behaviour instead, whatever the script says (a config can point one model
at one fault through its ``extra_headers``, and concurrent requests do not race for the
script). Streaming requests get SSE chunks, a usage chunk when
``stream_options.include_usage`` is set, and ``[DONE]``.

The tests use it through ``tests/conftest.py``'s ``fake`` fixture; ``benchmarks/`` run it
as ``python -m router.demo_provider --port N`` (the same as the command above).
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

__all__ = ["DemoProvider", "FakeFrontier", "answer_text", "demo_edit", "main", "usage"]


class DemoProvider(ThreadingHTTPServer):
    """The provider: ``start()`` serves it on a daemon thread, ``stop()`` closes it; every
    request's body and headers are kept (``requests``, ``headers``) for a test to read."""

    daemon_threads = True
    # The default backlog of 5 drops connections under a burst of 32 concurrent clients.
    request_queue_size = 256

    def __init__(self, port: int = 0, default: str = "ok") -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.default = default
        self.script: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def push(self, *behaviours: str) -> None:
        with self.lock:
            self.script.extend(behaviours)

    def next_behaviour(self) -> str:
        with self.lock:
            return self.script.popleft() if self.script else self.default

    def record(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers or {})

    def start(self) -> "DemoProvider":
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


#: The name the tests know it by (``tests/conftest.py``'s ``fake`` fixture).
FakeFrontier = DemoProvider


def answer_text(body: dict[str, Any], behaviour: str) -> str:
    """The answer's text for a request ``body`` under ``behaviour`` (what is not a fault)."""
    if behaviour == "demo":
        edit = demo_edit(body)
        if edit is not None:
            return edit
    if behaviour.startswith("text:"):
        return behaviour[5:]
    if behaviour.startswith("text64:"):
        return base64.b64decode(behaviour[7:]).decode()
    messages = body.get("messages")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"] \
        if isinstance(messages, list) else []
    last = users[-1].get("content") or "" if users else ""
    if isinstance(last, list):
        last = " ".join(str(p.get("text", "")) for p in last if isinstance(p, dict))
    return f"echo: {last}"


def demo_edit(body: dict[str, Any]) -> str | None:
    """For the prompt ``/v1/edit`` sends (``router.edit.planning.build_messages``), an answer
    in the format it asks for that puts one comment line naming the instruction on top of
    the first file shown; None for any other request. The demo cannot write code: this only
    lets the edit path (sketch, apply, diff) run end to end without a key."""
    from router.edit.planning import parse_blocks

    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return None
    system, user = (str(m.get("content") or "") if isinstance(m, dict) else ""
                    for m in messages[:2])
    if "editing a repository" not in system:
        return None
    # the files to edit come last, after any read-only context (planning._FAMILY_STYLE)
    shown = max(user.rfind("## Files you may edit"), user.rfind("<files>"), 0)
    files = [(path, text) for path, text in parse_blocks(user[shown:]) if path]
    if not files:
        return None
    path, text = files[0]
    instruction = user.split("\n", 2)[1].strip() if user.count("\n") >= 2 else "the edit"
    mark = "//" if "// ... existing code ..." in system else "#"
    comment = f"{mark} demo provider: {instruction}\n"
    if "SEARCH/REPLACE" in system:
        first = text.split("\n", 1)[0] + "\n"
        return f"{path}\n<<<<<<< SEARCH\n{first}=======\n{comment}{first}>>>>>>> REPLACE\n"
    return f"```{path}\n{comment}{text}```\n"


def usage(body: dict[str, Any], text: str) -> dict[str, int]:
    """Token counts as a provider bills them: about four characters a token."""
    messages = body.get("messages")
    contents = [m.get("content", "") for m in messages if isinstance(m, dict)] \
        if isinstance(messages, list) else []
    prompt = sum(len(str(c)) for c in contents) // 4 + 1
    completion = max(1, len(text) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus delayed ACKs
    # add ~40 ms to every keep-alive request.
    disable_nagle_algorithm = True
    server: DemoProvider

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        self.server.record(body, {k.lower(): v for k, v in self.headers.items()})
        behaviour = self.headers.get("X-Fake-Behaviour") or self.server.next_behaviour()
        if behaviour.startswith("slow:"):
            time.sleep(float(behaviour[5:]))
            behaviour = "ok"
        if self._error(behaviour) or self._broken(behaviour, bool(body.get("stream"))):
            return
        text = answer_text(body, behaviour)
        if body.get("stream"):
            self._stream(body, text, truncated=behaviour == "truncated", fault=behaviour)
        else:
            self._complete(body, text, behaviour)

    def _broken(self, behaviour: str, stream: bool) -> bool:
        """The answers no well-behaved server gives: hang-ups, empty bodies, HTML pages."""
        kind, _, arg = behaviour.partition(":")
        if kind == "hangup" or (kind == "disconnect" and not stream):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "empty" and stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "empty":
            self._raw(200, b"", "application/json")
        elif kind == "no-choices":
            self._raw(200, b'{"id": "x", "object": "chat.completion", "model": "fake"}',
                      "application/json")
        elif kind == "html":
            self._raw(int(arg or 502), b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                      "text/html")
        else:
            return False
        return True

    def _error(self, behaviour: str) -> bool:
        code, _, arg = behaviour.partition(":")
        if code == "429":
            self._json(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                       {"Retry-After": arg or "0"})
        elif code in ("500", "502", "503"):
            self._json(int(code), {"error": {"message": f"upstream {code}", "type": "server_error"}})
        elif code == "401":
            self._json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
        else:
            return False
        return True

    def _complete(self, body: dict[str, Any], text: str, behaviour: str) -> None:
        payload = {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage(body, text),
        }
        data = json.dumps(payload).encode()
        if behaviour == "malformed":
            data = b'{"id": "chatcmpl-fake", "choices": [ this is not json'
        if behaviour == "truncated":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        self._raw(200, data, "application/json")

    def _stream(self, body: dict[str, Any], text: str, truncated: bool,
                fault: str = "ok") -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        model = body.get("model", "fake")
        words = text.split(" ")
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}]}
        self._event(first)
        kind, _, arg = fault.partition(":")
        for i, word in enumerate(words):
            if truncated and i >= max(1, len(words) // 2):
                return  # the connection drops mid-stream
            if kind in ("disconnect", "error-event", "stall") and i >= int(arg or 1):
                self._fail_mid_stream(kind)
                return
            piece = word if i == 0 else " " + word
            self._event({**base, "choices": [{"index": 0, "delta": {"content": piece},
                                              "finish_reason": None}]})
        self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({**base, "choices": [], "usage": usage(body, text)})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _fail_mid_stream(self, kind: str) -> None:
        if kind == "disconnect":
            self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "error-event":
            self._event({"error": {"message": "overloaded mid-stream", "type": "server_error"}})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        else:  # stall: the connection stays open and says nothing
            time.sleep(30)

    def _event(self, obj: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, code: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._raw(code, json.dumps(obj).encode(), "application/json", headers)

    def _raw(self, code: int, data: bytes, ctype: str,
             headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def main(argv: Sequence[str] | None = None) -> int:
    """``complement demo-provider`` (and ``python -m router.demo_provider``): serve until
    interrupted."""
    parser = argparse.ArgumentParser(prog="complement demo-provider",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return serve(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=9100,
                        help="port on 127.0.0.1 (default 9100, where configs/default.yaml's "
                             "demo route looks; 0: any free port)")
    parser.add_argument("--default", default="demo", metavar="BEHAVIOUR",
                        help="behaviour when the script is empty (default: demo; see "
                             "router/demo_provider.py for the faults it can play)")


def serve(args: argparse.Namespace) -> int:
    server = DemoProvider(args.port, args.default)
    print(f"demo provider on {server.url} (no key needed; Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
