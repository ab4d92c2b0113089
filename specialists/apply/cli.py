"""``complement apply ORIGINAL SKETCH``: print the merged file (or the diff), or abstain.

Exit codes: 0 applied, 3 abstained (the reason and sketch span on stderr), 2 unreadable input.
``register(subparsers)`` adds the command to the ``complement`` CLI; ``main`` runs it alone
(``python -m specialists.apply.cli``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specialists.apply.applier import apply_sketch
from specialists.apply.result import ApplyOptions

__all__ = ["main", "register", "run"]

EXIT_ABSTAINED = 3
EXIT_BAD_INPUT = 2


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "apply", help="merge a lazy edit sketch into a file",
        description="Merge a lazy edit sketch into ORIGINAL: print the merged file, or the diff.",
    )
    parser.add_argument("original", type=Path, help="the file as it is now")
    parser.add_argument("sketch", type=Path, help="the lazy sketch ('-' reads standard input)")
    parser.add_argument("--path", help="path for the diff header and language (default: ORIGINAL)")
    parser.add_argument("--language", help="language, when the extension does not say")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--diff", action="store_true", help="print a unified diff (git apply)")
    out.add_argument("--json", action="store_true", help="print the full result as JSON")
    out.add_argument("--write", action="store_true", help="write the merged file over ORIGINAL")
    parser.add_argument("--max-delete-share", type=float, default=ApplyOptions.max_delete_share)
    parser.add_argument("--no-parse-check", action="store_true",
                        help="do not abstain when the edited region stops parsing")
    parser.add_argument("--no-cross-check", action="store_true",
                        help="skip the second (global) reading; about twice as fast, more "
                             "silent wrong merges (BENCHMARKS.md)")
    parser.set_defaults(handler=run)
    return parser


def _read(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def run(args: argparse.Namespace) -> int:
    try:
        original, sketch = _read(args.original), _read(args.sketch)
    except OSError as exc:
        print(f"complement apply: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = ApplyOptions(max_delete_share=args.max_delete_share, parse_check=not args.no_parse_check,
                           cross_check=not args.no_cross_check)
    result = apply_sketch(original, sketch, args.language, args.path or str(args.original), options)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif not result.applied:
        span = f" (sketch lines {result.span[0]}-{result.span[1]})" if result.span else ""
        print(f"complement apply: abstained: {result.reason}{span}", file=sys.stderr)
    elif args.diff:
        sys.stdout.write(result.diff)
    elif args.write:
        args.original.write_bytes((result.merged or "").encode("utf-8", errors="surrogateescape"))
    else:
        sys.stdout.write(result.merged or "")
    return 0 if result.applied else EXIT_ABSTAINED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="complement")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
