"""``complement demo-provider``: the offline demo provider (see ``router.demo_provider``)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def cmd_demo_provider(args: argparse.Namespace) -> int:
    from router.demo_provider import serve

    return serve(args)


def register(subparsers: Any) -> None:
    from router.demo_provider import add_arguments

    p = subparsers.add_parser(
        "demo-provider", help="an offline OpenAI-compatible provider: try chat and /v1/edit "
                              "with no key (the default config's demo route)",
        description="Serve a stand-in frontier model on 127.0.0.1 that needs no key and no "
                    "network: chat answers echo the last message; /v1/edit gets the first "
                    "file back with a comment naming the instruction. The default config's "
                    "`demo` route points at it (COMPLEMENT_DEMO_URL, default "
                    "http://127.0.0.1:9100/v1). See README, 'Without a key'.")
    add_arguments(p)
    p.set_defaults(func=cmd_demo_provider)
