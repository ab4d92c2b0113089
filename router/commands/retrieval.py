"""CLI commands of the retriever, added to ``complement`` by ``register(subparsers)``.

    complement index PATH                 index or refresh a repository (progress bar)
    complement search "query" [--repo .]  search an indexed repository
    complement retrieval finetune         contrastive fine-tune of the embedder
    complement retrieval ship DIR         quantise a build into the package as the default

Each handler takes the parsed arguments and returns an exit code. ``python -m
router.commands.retrieval`` runs the same commands on their own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specialists.paths import expand_home

__all__ = ["main", "register"]


def _retriever(args: argparse.Namespace) -> Any:
    """The config's retrieval specialist (its index directory, embedder and index options),
    with ``--index-dir``/``--embedder`` laid over; the retriever's defaults when the config
    declares none."""
    from router.config import load_config
    from router.registry import configures, specialist_from_config

    overrides = {"index_dir": args.index_dir, "embedder": args.embedder}
    blocks = load_config(args.config).specialists
    if configures(blocks, "retrieval"):
        return specialist_from_config(blocks, "retrieval", setup=False, **overrides)
    from retrieval.specialist import RetrievalSpecialist

    return RetrievalSpecialist(**{k: v for k, v in overrides.items() if v is not None})


def _open_index(args: argparse.Namespace, repo: Path) -> Any:
    """The repository's index, where and as the configured retriever keeps it."""
    from retrieval.index import Index
    from retrieval.specialist import index_dir_for

    retriever = _retriever(args)
    return Index.open(index_dir_for(retriever.index_base, repo), retriever.config)


def cmd_index(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    repo = expand_home(args.path, param="path", what="path").resolve()
    if not repo.is_dir():
        print(f"complement index: {args.path} is not a directory", file=sys.stderr)
        return 2
    index = _open_index(args, repo)
    if index.notice:
        print(f"note: {index.notice}", file=sys.stderr)
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            unit = "files" if stage == "chunk" else "chunks"
            bar = bars[stage] = tqdm(total=total, desc=stage, unit=unit, disable=args.quiet)
        bar.update(done - bar.n)

    try:
        stats = index.refresh(repo, progress)
    finally:
        for bar in bars.values():
            bar.close()
    if args.json:
        print(json.dumps({"index": str(index.directory), **stats.to_dict()}))
    else:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(stats.skipped.items())) or "none"
        print(f"{repo}: {stats.chunks_total} chunks from {stats.files_seen} files "
              f"(+{stats.files_added} ~{stats.files_changed} -{stats.files_removed} files; "
              f"{stats.chunks_embedded} chunks embedded, {stats.chunks_reused} reused) in "
              f"{stats.seconds:.1f} s; skipped: {skipped}\nindex: {index.directory}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from retrieval.index import Filters

    repo = expand_home(args.repo).resolve()
    index = _open_index(args, repo)
    if not index.chunks:
        print(f"complement search: {repo} is not indexed; run: complement index {repo}",
              file=sys.stderr)
        return 1
    filters = Filters.make(args.path_glob, args.language)
    hits = index.search(args.query, k=args.k, filters=filters, mode=args.mode)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits]))
        return 0
    for n, h in enumerate(hits, 1):
        c = h.chunk
        print(f"{n:>2}. {c.path}:{c.start_line}-{c.end_line}  {c.symbol or c.kind}  "
              f"[{h.retriever} {h.score:.3f}]")
        if args.show:
            print("    " + "\n    ".join(c.text.split("\n")[: args.show]))
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from retrieval.finetune import Args, finetune

    a = Args(base=args.base, max_pairs=args.max_pairs, epochs=args.epochs,
             max_seconds=args.max_seconds, batch_size=args.batch_size, lr=args.lr)
    if args.out:
        a.out = Path(args.out).expanduser()
    if args.roots:
        a.roots = [Path(r) for r in args.roots]
    finetune(a)
    print(f"use it with: complement index PATH --embedder {a.out}")
    return 0


def cmd_ship(args: argparse.Namespace) -> int:
    from retrieval.shipped import SHIPPED_DIR, ship

    source = Path(args.source).expanduser()
    if not (source / "static.json").is_file():
        print(f"complement retrieval ship: {source} is not a static embedder directory "
              "(build one with `complement retrieval finetune --out DIR`)", file=sys.stderr)
        return 2
    meta = ship(source, Path(args.out) if args.out else SHIPPED_DIR)
    print(json.dumps({"out": str(args.out or SHIPPED_DIR), "sha256": meta["sha256"],
                      "fingerprint": meta["fingerprint"]}))
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index-dir", default=None,
                   help="where indexes live (default: the config's retrieval index_dir)")
    p.add_argument("--embedder", default=None,
                   help="static, minilm, or a model directory (default: the config's)")
    p.add_argument("--config", "-c", metavar="FILE",
                   help="config whose retrieval specialist is used (default: "
                        "configs/default.yaml)")
    p.add_argument("--json", action="store_true", help="print JSON")


def register(subparsers: Any) -> None:
    """Add ``index``, ``search`` and ``retrieval finetune`` to the ``complement`` CLI."""
    p = subparsers.add_parser("index", help="index or refresh a repository for retrieval")
    p.add_argument("path", help="repository directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _common(p)
    p.set_defaults(func=cmd_index)

    p = subparsers.add_parser("search", help="search an indexed repository")
    p.add_argument("query")
    p.add_argument("--repo", default=".", help="indexed repository (default: .)")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--path-glob", action="append", default=None, help="e.g. 'src/**/*.py'")
    p.add_argument("--language", action="append", default=None, help="e.g. python")
    p.add_argument("--mode", choices=("hybrid", "bm25", "dense"), default="hybrid")
    p.add_argument("--show", type=int, default=0, metavar="N", help="print N lines of each")
    _common(p)
    p.set_defaults(func=cmd_search)

    p = subparsers.add_parser("retrieval", help="retrieval model tools")
    sub = p.add_subparsers(dest="retrieval_command", required=True)
    f = sub.add_parser("finetune", help="contrastive fine-tune of the embedder on "
                                        "(docstring, code) pairs from site-packages")
    f.add_argument("--base", default="static-base",
                   help="static-base (default: MiniLM distilled), minilm or a directory")
    f.add_argument("--out", default=None, help="output directory (default "
                                               "$COMPLEMENT_HOME/models/static-ft)")
    f.add_argument("--roots", nargs="*", default=None, help="source trees to mine pairs from")
    f.add_argument("--max-pairs", type=int, default=60_000)
    f.add_argument("--epochs", type=float, default=3.0)
    f.add_argument("--max-seconds", type=float, default=240.0, help="training time budget")
    f.add_argument("--batch-size", type=int, default=256)
    f.add_argument("--lr", type=float, default=3e-3)
    f.set_defaults(func=cmd_finetune)
    s = sub.add_parser("ship", help="quantise a built static embedder into the package as the "
                                    "shipped default (int8 + checksums)")
    s.add_argument("source", help="a static embedder directory (complement retrieval finetune "
                                  "--out DIR)")
    s.add_argument("--out", default=None, help="target (default: retrieval/shipped/static-ft)")
    s.set_defaults(func=cmd_ship)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="complement")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
