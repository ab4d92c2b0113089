"""``load_embedder``: the embedder a spec names, building the default one on first use.

The default (``static``) is a recipe, not a download: MiniLM distilled to a static table,
then post-trained on (docstring, code) pairs from site-packages (``retrieval.finetune``).
This module sits above both ``embedders`` and ``finetune`` so neither imports the other
back: ``finetune`` trains embedders, and this is the one place that may ask it to.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from retrieval.embedders import Embedder, default_static_path, open_embedder, tuned_static_path

__all__ = ["load_embedder"]

log = logging.getLogger(__name__)


def load_embedder(spec: str | None = None, *, log_fn: Callable[[str], None] | None = None,
                  **options: Any) -> Embedder:
    """Build the embedder a spec names (see ``retrieval.embedders``). ``static`` is the one
    built here if any, else the one shipped with the package (``retrieval.shipped``); only
    an install without either builds it (a few minutes on 2 cores)."""
    spec = spec or "static"
    if spec == "static" and default_static_path() is None:  # neither built nor shipped
        from retrieval.finetune import Args, finetune

        path = tuned_static_path()
        log.warning("building the default embedder in %s: MiniLM distilled to a static "
                    "table, then post-trained on (docstring, code) pairs from "
                    "site-packages (once; a few minutes)", path)
        finetune(Args(out=path, max_seconds=240.0), log_fn=log_fn or log.info)
    return open_embedder(spec, **options)
