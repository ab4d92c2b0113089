"""How the server's HTTP layer is run: uvicorn's options that follow from the config.

``complement serve`` and every test or benchmark that serves the app in-process take their
uvicorn options from here, so what is measured is what is shipped.
"""

from __future__ import annotations

from typing import Any

from router.config import Config

__all__ = ["uvicorn_options"]


def uvicorn_options(config: Config) -> dict[str, Any]:
    """uvicorn.Config keyword arguments for ``config`` (host and port excepted)."""
    return {"timeout_keep_alive": 5}
