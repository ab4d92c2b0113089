"""Shared fixtures: the fake frontier and a real uvicorn server for an app, on loopback."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

# No network, ever: litellm's cost map is the local one and no hub is asked.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from benchmarks.security.common import free_port, running  # noqa: E402,F401  (one copy)
from tests.fakes.fake_frontier import FakeFrontier  # noqa: E402


@pytest.fixture
def fake() -> Iterator[FakeFrontier]:
    server = FakeFrontier().start()
    try:
        yield server
    finally:
        server.stop()
