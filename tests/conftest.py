"""Shared fixtures: the fake frontier (the product's demo provider) and a real uvicorn server
for an app, on loopback (``router.serving.running``)."""

from __future__ import annotations

import os
from typing import Iterator

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
