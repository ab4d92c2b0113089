"""``complement apply ORIGINAL SKETCH``: print the merged file (or the diff), or abstain.

The applier is the config's specialist of kind ``apply`` (``--config``, default
``configs/default.yaml``), so a team that swaps it in YAML swaps it here too; the flags
override its options. Exit codes: 0 applied, 3 abstained (the reason and sketch span on
stderr), 2 unreadable input or a bad config. ``register(subparsers)`` adds the command to
the ``complement`` CLI; ``main`` runs it alone (``python -m router.commands.apply``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from router.errors import ConfigError

__all__ = ["main", "register", "run"]

EXIT_ABSTAINED = 3
EXIT_BAD_INPUT = 2


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "apply", help="merge a lazy edit sketch into a file",
        description="Merge a lazy edit sketch into ORIGINAL: print the merged file, or the diff. "
                    "The sketch may also be a model's whole chat answer (code in Markdown "
                    "fences, prose around it), SEARCH/REPLACE blocks, a unified diff or an "
                    "apply_patch envelope. Exit 3 when it abstains (the reason on stderr, or in --json).",
    )
    parser.add_argument("original", type=Path, help="the file as it is now")
    parser.add_argument("sketch", type=Path, help="the lazy sketch or edit answer ('-' reads standard input)")
    parser.add_argument("--path", help="path for the diff header and language (default: ORIGINAL)")
    parser.add_argument("--language", help="language, when the extension does not say")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--diff", action="store_true", help="print a unified diff (git apply)")
    out.add_argument("--json", action="store_true", help="print the full result as JSON")
    out.add_argument("--write", action="store_true", help="write the merged file over ORIGINAL")
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="config whose apply specialist merges (default: "
                             "configs/default.yaml)")
    parser.add_argument("--max-delete-share", type=float, default=None,
                        help="abstain when the merge deletes more than this share of the "
                             "file (default: the config's, else 0.3)")
    parser.add_argument("--no-parse-check", action="store_true",
                        help="do not abstain when the edited region stops parsing")
    parser.add_argument("--no-cross-check", action="store_true",
                        help="skip the second (global) reading; about twice as fast, more "
                             "silent wrong merges (BENCHMARKS.md)")
    parser.set_defaults(func=run)
    return parser


def _header_path(original: Path) -> str:
    """The name a diff header gives ORIGINAL: relative to the working directory when it is
    under it, else the file's name (``a//tmp/x.py`` is no path a patch tool can use)."""
    if str(original) == "-":
        return "-"
    try:
        return Path(original).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(original).name


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
    try:
        applier = _applier(args)
    except ConfigError as exc:
        print(f"complement apply: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    answer = applier.answer({"original": original, "sketch": sketch, "language": args.language,
                             "path": args.path or _header_path(args.original)})
    out = ((answer.output or {}).get("files") or [{}])[0]
    applied = not answer.abstained and out.get("merged") is not None
    merged = out.get("merged") or ""
    if args.json:
        print(json.dumps(out, indent=2))
    elif not applied:
        span = out.get("span")
        where = f" (sketch lines {span[0]}-{span[1]})" if span else ""
        print(f"complement apply: abstained: {out.get('reason') or answer.reason}{where}",
              file=sys.stderr)
    elif args.diff:
        sys.stdout.write(out.get("diff", ""))
    elif args.write:
        _write(args.original, merged)
    else:
        sys.stdout.write(merged)
    return 0 if applied else EXIT_ABSTAINED


def _applier(args: argparse.Namespace) -> Any:
    """The config's apply specialist, with the flags laid over its options."""
    from router.config import load_config
    from router.registry import specialist_from_config

    config = load_config(args.config)
    overrides: dict[str, Any] = {"max_delete_share": args.max_delete_share}
    if args.no_parse_check:
        overrides["parse_check"] = False
    if args.no_cross_check:
        overrides["cross_check"] = False
    return specialist_from_config(config.specialists, "apply", **overrides)


def _write(path: Path, text: str) -> None:
    """Replace ``path`` atomically (a temp file beside it, then rename), keeping its mode."""
    import os
    import shutil
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as fh:
        fh.write(text.encode("utf-8", errors="surrogateescape"))
    shutil.copymode(path, tmp)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="complement")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
