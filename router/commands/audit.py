"""``complement audit``: run the security probes against this build (see ``router.audit``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def cmd_audit(args: argparse.Namespace) -> int:
    from router.audit import PROBES, run_all, summary

    only = [x.strip().upper() for x in (args.findings or "").split(",") if x.strip()]
    unknown = [n for n in only if n not in PROBES]
    if unknown:
        print(f"complement: unknown finding {', '.join(unknown)}: choose from "
              f"{','.join(PROBES)}", file=sys.stderr)
        return 2
    tallies = run_all(only or None, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(summary(tallies), indent=2 if args.pretty else None))
    return 0 if all(t.ok for t in tallies) else 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit", help="attack this build as issue 41's findings were found; print the tally",
        description="Run the security probes (router/audit: one per finding of issue 41). "
                    "Each starts its own server on loopback with a config it writes in a "
                    "temporary folder and attacks it: provider redirects, keyless servers on "
                    "every interface, model answers writing or running outside the request, "
                    "symlink races, cross-site requests, slow clients, disclosure. It checks "
                    "this build and this machine (its sandbox, its limits), not a server you "
                    "run. One line per finding on stderr, the tally as JSON on stdout; exit "
                    "1 if anything got through. All of them take a few minutes.")
    p.add_argument("--findings", metavar="F1,F3,...",
                   help="only these findings (default: all, F1 to F11)")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.set_defaults(func=cmd_audit)
