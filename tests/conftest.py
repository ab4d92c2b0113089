"""Shared fixtures: the fake frontier (the product's demo provider) and a real uvicorn server
for an app, on loopback (``router.serving.running``)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

# No network, ever: litellm's cost map is the local one and no hub is asked.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from router.demo_provider import FakeFrontier  # noqa: E402
from router.serving import free_port, running  # noqa: E402,F401  (tests import them from here)


@pytest.fixture
def fake() -> Iterator[FakeFrontier]:
    server = FakeFrontier().start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def serving_ready(config: dict[str, Any], timeout_s: float = 120.0) -> Iterator[str]:
    """The real app for ``config`` (a mapping, as YAML gives it) over HTTP on loopback,
    yielded once ``/readyz`` answers 200 (every specialist loaded)."""
    import httpx

    from router.audit.common import serve

    with serve(config) as base:
        deadline = time.monotonic() + timeout_s
        while httpx.get(f"{base}/readyz", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, f"the server did not get ready in {timeout_s:.0f} s"
            time.sleep(0.1)
        yield base
