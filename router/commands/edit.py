"""``complement edit``, ``complement eval`` (and ``eval compare``), ``complement router train``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specialists.paths import expand_home

__all__ = ["register"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- edit ------------------------------------------------------------------------------------
def cmd_edit(args: argparse.Namespace) -> int:
    import asyncio
    import shlex

    from router.config import load_config
    from router.edit import EditPipeline, EditRequest, verifiers_for
    from router.errors import ComplementError
    from router.frontier import FrontierClient
    from router.registry import specialist_from_config
    from specialists.base import SpecialistError

    config = load_config(args.config)
    if args.route not in config.routes:
        print(f"complement: route {args.route!r} is not in the config (known: "
              f"{', '.join(sorted(config.routes))})", file=sys.stderr)
        return 2
    frontier = FrontierClient(config.models, config.frontier, config.env_refs)
    targets = [t for t in config.routes[args.route].targets if t in frontier.models]
    if any(frontier.models[t].model.startswith("replay/") for t in targets):
        from router.replay import ReplayStore, install

        install(ReplayStore())

    def indexing(stage: str, done: int, total: int) -> None:
        print(f"\rindexing {args.repo}: {stage} {done}/{total}", end="", file=sys.stderr)

    repo = expand_home(args.repo).resolve()
    extra = [shlex.split(cmd) for cmd in args.verify or []]
    verify = config.workspace.verify.model_copy(update={"timeout_s": args.verify_timeout}) \
        if args.verify_timeout else config.workspace.verify
    pipeline = EditPipeline(
        frontier, targets, route=args.route,
        applier=specialist_from_config(config.specialists, "apply"),
        retriever=_retriever(config), verifiers=verifiers_for(verify, args.route, repo, extra),
        auto_index=not args.no_index, progress=indexing)
    req = EditRequest(args.instruction, repo=str(repo), files=args.file or [],
                      strategy=args.strategy, write=args.write)
    try:
        result = asyncio.run(pipeline.run(req))
    except ComplementError as exc:
        print(f"complement: {exc.message}", file=sys.stderr)
        return 1
    except SpecialistError as exc:
        print(f"complement: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        _print_edit(result)
    return 0 if result.status == "applied" else 1


def _retriever(config: Any) -> Any:
    """The config's retriever, loaded before the edit starts (the CLI waits for it); none
    configured: the edit runs without retrieved context."""
    from router.registry import configures, specialist_from_config

    if not configures(config.specialists, "retrieval"):
        return None
    retriever = specialist_from_config(config.specialists, "retrieval")
    from specialists.base import WaitsReady, capabilities

    wait = retriever.wait_ready if WaitsReady in capabilities(retriever) else None
    if wait is not None:
        wait()
    return retriever


def _print_edit(result: Any) -> None:
    for s in result.trace:
        bits = [f"{s.stage:<8} {s.outcome:<9}"]
        if s.format:
            bits.append(s.format)
        if s.model and s.outcome != "ok":
            bits.append(f"model={s.model}")
        elif s.model:
            bits.append(f"model={s.model} in={s.prompt_tokens} out={s.output_tokens} "
                        f"${s.cost_usd:.5f}")
        bits.append(f"{s.latency_s:.3f}s ({s.latency_kind})")
        if s.reason:
            bits.append(f"— {s.reason}")
        print("  ".join(bits), file=sys.stderr)
    print(f"{result.status} via {result.format or '-'} (mode {result.mode}; "
          f"${result.cost_usd:.5f}, {result.output_tokens} output tokens, "
          f"{result.latency_s:.2f}s)" + ("" if result.status == "applied"
                                          else f": {result.reason}"), file=sys.stderr)
    if result.written:
        print(f"wrote {', '.join(result.written)}", file=sys.stderr)
    sys.stdout.write(result.diff)


# -- eval --------------------------------------------------------------------------------------
_COMPARE_HELP = """\
usage: complement eval compare RUN1 RUN2 [--json]

What changed between two runs of a suite (the JSON files `complement eval SUITE.yaml`
writes under --out, runs/eval by default): per route, the summary metrics side by side
with their change; for edit suites, the tasks whose exact-match outcome flipped.

positional arguments:
  RUN1 RUN2   two eval runs: JSON files, or run directories (their newest JSON)

options:
  --json      print the comparison as JSON
"""


class _EvalHelp(argparse.Action):
    """``-h``: ``eval``'s help, or the comparison's after ``eval compare``."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        target = getattr(namespace, "target", None) or []
        if target[:1] == ["compare"]:
            sys.stdout.write(_COMPARE_HELP)
        else:
            parser.print_help()
        parser.exit()


def cmd_eval(args: argparse.Namespace) -> int:
    target = args.target
    if target and target[0] == "compare":
        return _compare(target[1:], args)
    if len(target) != 1:
        print("complement eval: give one SUITE.yaml, or `compare RUN1 RUN2`", file=sys.stderr)
        return 2
    from router.evals import run_suite
    from router.evals.report import table, write_run

    routes = [r.strip() for r in args.routes.split(",") if r.strip()] if args.routes else None
    run = run_suite(target[0], routes, args.config, limit=args.limit, progress=_progress)
    run["command"] = "complement " + " ".join(sys.argv[1:]) if sys.argv else ""
    stem = Path(target[0]).stem
    paths = write_run(run, Path(args.out), stem)
    print(table(run))
    print(f"\nJSON: {paths['json']}\nHTML: {paths['html']}")
    return 0


def _compare(runs: list[str], args: argparse.Namespace) -> int:
    from router.evals.compare import compare, compare_text, load_run

    if len(runs) != 2:
        print("complement eval compare: give two run JSON files (or run directories)",
              file=sys.stderr)
        return 2
    diff = compare(load_run(runs[0]), load_run(runs[1]))
    print(json.dumps(diff, indent=1) if args.json else compare_text(diff))
    return 0


# -- router train ------------------------------------------------------------------------------
def cmd_router_train(args: argparse.Namespace) -> int:
    from router.learned import train_from_runs

    clf = train_from_runs(args.runs, args.cheap, args.strong,
                          target_cost_usd=args.target_cost,
                          target_cost_share=args.target_cost_share)
    clf.save(args.out)
    chosen = next(r for r in clf.meta["calibration"] if r["threshold"] == round(clf.threshold, 6))
    print(f"trained on {clf.meta['tasks']} tasks ({args.cheap} exact on "
          f"{clf.meta['cheap_success']:.1%}); threshold {clf.threshold:.4f} for a target of "
          f"${clf.meta['target_cost_usd']:.6f}/task → out-of-fold: {chosen['cheap_share']:.0%} "
          f"to {args.cheap}, ${chosen['cost_usd']:.6f}/task, exact {chosen['quality']:.1%}")
    print(f"wrote {args.out}")
    return 0


def register(subparsers: Any) -> None:
    edit = subparsers.add_parser(
        "edit", help="edit files from an instruction: retrieve, sketch, apply, verify",
        description="Ask the route's frontier model for a lazy sketch of the change, merge it "
                    "with the applier, verify, and escalate (search/replace, then whole file) "
                    "when needed. Prints the diff on stdout and the trace on stderr; writes "
                    "nothing unless --write.")
    edit.add_argument("instruction", help="what to change, in words")
    edit.add_argument("--repo", default=".", help="repository root (default: .)")
    edit.add_argument("--file", action="append", metavar="PATH",
                      help="file to edit, relative to --repo (repeatable; default: chosen by "
                           "retrieval from the repository's index)")
    edit.add_argument("--route", default="auto", help="route of the config (default: auto)")
    edit.add_argument("--strategy", default="cascade",
                      choices=["cascade", "sketch", "search_replace", "whole_file"])
    edit.add_argument("--verify", metavar="CMD", action="append",
                      help="command that must pass on the result, after the config's "
                           "(workspace.verify); split like a shell would but run without one, "
                           "in a scratch copy of the repo, e.g. 'pytest -q' (repeatable)")
    edit.add_argument("--verify-timeout", type=float, default=None, metavar="S",
                      help="limit for each verification command (default: "
                           "workspace.verify.timeout_s, 300)")
    edit.add_argument("--write", action="store_true", help="write the files (atomically)")
    edit.add_argument("--no-index", action="store_true",
                      help="do not index an unindexed repository (continue without context)")
    edit.add_argument("--json", action="store_true", help="print the whole result as JSON")
    edit.add_argument("--config", "-c", metavar="FILE", help="YAML config")
    edit.set_defaults(func=cmd_edit)

    ev = subparsers.add_parser(
        "eval", help="compare routes on a suite (edit, tab, retrieval); `eval compare A B`",
        description="`complement eval SUITE.yaml --routes A,B,C` runs a suite and writes a "
                    "table, a JSON run and an HTML report; `complement eval compare RUN1 RUN2` "
                    "shows what changed between two runs. Suites: configs/eval/*.yaml.",
        add_help=False)
    ev.add_argument("-h", "--help", action=_EvalHelp, help="show this help message and exit "
                    "(`eval compare --help`: the comparison's)")
    ev.add_argument("target", nargs="+", metavar="SUITE.yaml | compare RUN1 RUN2")
    ev.add_argument("--routes", help="comma-separated routes of the eval config "
                    "(default: all; learned routes only if their classifier exists)")
    ev.add_argument("--config", "-c", metavar="FILE",
                    help="eval config with models and routes (default: configs/eval/routes.yaml)")
    ev.add_argument("--out", default="runs/eval", help="report directory (default: runs/eval)")
    ev.add_argument("--limit", type=int, help="at most this many tasks per project")
    ev.add_argument("--json", action="store_true", help="compare: print JSON")
    ev.set_defaults(func=cmd_eval)

    rt = subparsers.add_parser("router", help="the learned route choice")
    rt_sub = rt.add_subparsers(dest="router_command", metavar="ACTION", required=True)
    train = rt_sub.add_parser(
        "train", help="train the learned route classifier from eval runs",
        description="Fit P(cheap route exact) on every task both routes ran in the given eval "
                    "runs, and calibrate the threshold (out of fold) for a target mean cost.")
    train.add_argument("runs", nargs="+", help="eval run JSON files (complement eval ...)")
    train.add_argument("--cheap", default="cascade", help="the cheap route (default: cascade)")
    train.add_argument("--strong", default="whole-file",
                       help="the strong route (default: whole-file)")
    train.add_argument("--target-cost", type=float, metavar="USD",
                       help="mean cost per request the threshold must stay under")
    train.add_argument("--target-cost-share", type=float, default=0.5, metavar="F",
                       help="...or this share of the strong route's mean cost (default 0.5)")
    train.add_argument("--out", default="configs/eval/router-classifier.json",
                       help="classifier file to write (JSON)")
    train.set_defaults(func=cmd_router_train)
