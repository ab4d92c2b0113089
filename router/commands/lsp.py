"""``complement lsp``: the language server on stdio (see ``router.lsp``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

__all__ = ["register"]


def cmd_lsp(args: argparse.Namespace) -> int:
    from router.lsp import HttpBackend, LocalBackend, build_server

    # stdout carries the protocol: every log line goes to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.server:
        key = args.api_key or os.environ.get("COMPLEMENT_API_KEY") or None
        backend: Any = HttpBackend(args.server, key)
    else:
        from router.config import load_config

        backend = LocalBackend(load_config(args.config))
    build_server(backend).start_io()
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "lsp", help="language server on stdio: Tab ghost text and apply-sketch in an editor",
        description="A Language Server Protocol server on stdin/stdout: inline completions "
                    "from the Tab specialist (accept and reject are sent as feedback), and a "
                    "code action that merges a selected lazy sketch into the document. With "
                    "--server it asks a running `complement serve`; without, it loads the "
                    "config's specialists itself. See README, 'In an editor'.")
    p.add_argument("--server", default=None, metavar="URL",
                   help="a running server, e.g. http://127.0.0.1:8000 (default: in-process)")
    p.add_argument("--api-key", default=None,
                   help="key for --server (default: COMPLEMENT_API_KEY)")
    p.add_argument("--config", "-c", metavar="FILE",
                   help="config for the in-process specialists (default: configs/default.yaml)")
    p.set_defaults(func=cmd_lsp)
