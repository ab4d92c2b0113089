"""How the server's HTTP layer is run: uvicorn's options that follow from the config.

``complement serve`` and every test or benchmark that serves the app in-process take their
uvicorn options from here, so what is measured is what is shipped.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no limit on
how long a client may take to send its request headers: a connection that sends half a
request line and then nothing is held forever, one file descriptor each (issue 41, F10).
The protocol classes here add that limit, ``server.header_timeout_s``: a timer starts when
the connection is made (and again after each response), and stops when a request's headers
are complete; when it fires, the connection is closed, with a 408 if part of a request had
arrived. The body has its own limits, in :class:`router.app.GuardMiddleware`.

:func:`running` serves an app on a thread of this process, on a free loopback port: for the
tests, the security audit (``router.audit``) and the benchmarks, which all need a real
server over HTTP and none of which may import another's helpers. :class:`ServeProcess`
runs ``complement serve`` in a subprocess (the simulated loop's server).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from uvicorn.protocols.http.h11_impl import H11Protocol

from router.config import Config

__all__ = ["HeaderDeadlineH11", "HeaderDeadlineHttpTools", "KEEP_ALIVE_S", "ServeProcess",
           "free_port", "running", "uvicorn_options"]

#: How long an idle keep-alive connection is kept (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE_S = 5


def _timeout_response(seconds: float) -> bytes:
    body = json.dumps({"error": {
        "message": f"the request headers did not arrive within {seconds:g}s "
                   "(server.header_timeout_s); send the whole request at once",
        "type": "invalid_request_error", "param": None,
        "code": "request_timeout"}}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
            + body)


class _HeaderDeadline:
    """Mixed into one of uvicorn's HTTP protocols: a connection whose request headers are
    not complete within ``header_timeout_s`` of its start (or of its last response) is
    closed. ``cycle`` is uvicorn's request in progress; while one is (its headers were
    complete), no timer runs."""

    cycle: Any
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def __init__(self, *args: Any, header_timeout_s: float = 10.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._header_timer: asyncio.TimerHandle | None = None
        self._partial_request = False  # bytes of a request whose headers are not complete

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is not None and data:
            self._partial_request = True
        super().data_received(data)  # type: ignore[misc]
        if self._in_request():  # the headers are complete: the request is the app's now
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self._in_request() and not self.transport.is_closing():
            self._arm_header_deadline()  # the next request's headers get as long

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)  # type: ignore[misc]

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._partial_request = False
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_deadline)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_deadline(self) -> None:
        self._header_timer = None
        if self._in_request() or self.transport.is_closing():
            return
        if self._partial_request:  # someone is there: say why the connection ends
            self.transport.write(_timeout_response(self.header_timeout_s))
        self.transport.close()


class HeaderDeadlineH11(_HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol with the header deadline."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed: h11 only
    HeaderDeadlineHttpTools: Any = None
else:
    class HeaderDeadlineHttpTools(_HeaderDeadline, HttpToolsProtocol):  # type: ignore[no-redef]
        """uvicorn's httptools protocol (its fastest) with the header deadline."""


def protocol_class() -> type:
    """The protocol uvicorn's ``auto`` would pick (httptools if installed), with the deadline."""
    return HeaderDeadlineHttpTools if HeaderDeadlineHttpTools is not None else HeaderDeadlineH11


def uvicorn_options(config: Config) -> dict[str, Any]:
    """uvicorn.Config keyword arguments for ``config`` (host and port excepted).

    A ``functools.partial`` of a module-level class, so ``--workers N`` can hand it to its
    worker processes (uvicorn pickles its config for them)."""
    server = config.server
    return {"timeout_keep_alive": KEEP_ALIVE_S,
            "http": partial(protocol_class(), header_timeout_s=server.header_timeout_s),
            "ws": "none",  # no endpoint takes a WebSocket: an upgrade is a plain request
            }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(app: Any, host: str = "127.0.0.1", **uvicorn_options: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free port of ``host`` (loopback unless a test binds
    every interface); yields a loopback base URL for it. ``uvicorn_options`` go to
    ``uvicorn.Config`` (e.g. the server's own timeouts, as ``complement serve`` sets them)."""
    import uvicorn

    port = free_port()
    options = {"log_level": "warning", "lifespan": "on", **uvicorn_options}
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class ServeProcess:
    """``complement serve --config CONFIG --port PORT`` in a subprocess of this one, its
    output in ``log``. The simulated loop trains against it (``complement loop --simulate``
    hands it to ``specialists.tab.loop.runner.run_loop``), as do the loop's tests and
    benchmarks. :meth:`start` returns once ``/readyz`` answers 200."""

    def __init__(self, config: Path, port: int, log: Path) -> None:
        self.config, self.port, self.log = config, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> "ServeProcess":
        import httpx

        repo = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(repo)}
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "router.cli", "serve", "--config", str(self.config),
                 "--port", str(self.port), "--log-level", "warning"], stdout=fh,
                stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the loop's server exited ({self.proc.returncode}); "
                                   f"see {self.log}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the loop's server was not ready in {timeout}s; see {self.log}")

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.proc.wait(timeout=60)
