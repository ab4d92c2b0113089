"""``complement tab pretrain|train`` and ``complement data from-git``.

``register(subparsers)`` adds both the ``tab`` and the ``data`` commands to the main CLI;
each training command's flags are its hyperparameter dataclass's fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specialists.lm_recipe import add_arguments, from_arguments

__all__ = ["register", "main"]


def _pretrain(ns: argparse.Namespace) -> int:
    from specialists.tab.pretrain import PretrainArgs, pretrain

    figures = pretrain(from_arguments(PretrainArgs, ns))
    print(json.dumps({k: v for k, v in figures.items() if k not in ("history", "args")}))
    return 0


def _train(ns: argparse.Namespace) -> int:
    from specialists.tab.train import Args, train

    summary = train(from_arguments(Args, ns))
    print(json.dumps({"best": summary["best"], "minutes": summary["minutes"], "out": ns.out}))
    return 0


def _from_git(ns: argparse.Namespace) -> int:
    from specialists.tab.data import from_git, write_pairs

    try:
        pairs = from_git(ns.path, name=ns.name, max_pairs=ns.max_pairs, seed=ns.seed)
    except (ValueError, OSError) as exc:
        print(f"complement data from-git: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # git itself failed: say what it said
        stderr = getattr(exc, "stderr", "") or ""
        print(f"complement data from-git: git failed on {ns.path}: {stderr.strip() or exc}", file=sys.stderr)
        return 2
    if ns.out == "-":
        for pair in pairs:
            print(json.dumps(pair.to_json(), ensure_ascii=False))
        return 0
    n = write_pairs(pairs, ns.out)
    print(json.dumps({"pairs": n, "out": ns.out}), file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add ``tab`` (pretrain, train) and ``data`` (from-git) to the main CLI."""
    from specialists.tab.pretrain import PretrainArgs
    from specialists.tab.train import Args

    tab = subparsers.add_parser("tab", help="the Tab specialist: pretrain the LM, train the policy")
    tab_sub = tab.add_subparsers(dest="tab_command", required=True)
    p = tab_sub.add_parser("pretrain", help="train the tokenizer and the small LM here (CPU: < 1 hour)")
    add_arguments(p, PretrainArgs)
    p.set_defaults(func=_pretrain)
    train_help = ("train the policy: REINFORCE with a learned baseline on replayed edits (the "
                  "shipped checkpoint's recipe), or, with --from-events, one PPO-clip update on "
                  "the deployed version's logged events (the loop's step)")
    t = tab_sub.add_parser("train", help=train_help, description=train_help)
    add_arguments(t, Args)
    t.set_defaults(func=_train)
    from router.commands.loop import add_tab_commands

    add_tab_commands(tab_sub, t)  # train --from-events, rollback: the online loop's steps

    data = subparsers.add_parser("data", help="edit data for Tab and the benchmarks")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    g = data_sub.add_parser("from-git", help="mine before/after pairs from a git repository (JSONL)")
    g.add_argument("path", help="a local git repository")
    g.add_argument("--out", default="-", help="output .jsonl or .jsonl.gz")
    g.add_argument("--name", default=None, help="project name in the 'repo' field (default: folder name)")
    g.add_argument("--max-pairs", type=int, default=400)
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=_from_git)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m router.commands.tab``) with the same commands."""
    parser = argparse.ArgumentParser(prog="complement")
    register(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(argv)
    return int(ns.func(ns) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
