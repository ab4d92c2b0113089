"""Shared fixtures: the fake frontier and a real uvicorn server for an app, on loopback."""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

# No network, ever: litellm's cost map is the local one and no hub is asked.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tests.fakes.fake_frontier import FakeFrontier  # noqa: E402


@pytest.fixture
def fake() -> Iterator[FakeFrontier]:
    server = FakeFrontier().start()
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free port of ``host`` (loopback unless a test binds
    every interface); yields a loopback base URL for it."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
