"""``complement loop``, ``complement loop status``, ``complement tab train --from-events``,
``complement tab rollback VERSION``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable

from specialists.base import SpecialistError

__all__ = ["add_tab_commands", "register"]


def _state_dir(ns: argparse.Namespace) -> Path:
    return Path(ns.data_dir) if ns.data_dir else Path(ns.out) / "state"


def _loop(ns: argparse.Namespace) -> int:
    from specialists.tab.loop.runner import LoopArgs, run_loop, status

    if ns.action == "status":
        print(json.dumps(status(_state_dir(ns), ns.out), indent=1))
        return 0
    if not ns.simulate:
        print("complement loop: only --simulate is available: live editors feed the same "
              "API; run `complement serve` and train with `complement tab train "
              "--from-events`", file=sys.stderr)
        return 2
    from router.config import default_config_path

    fields = {f.name for f in dataclasses.fields(LoopArgs)}
    args = LoopArgs(**{k: v for k, v in vars(ns).items() if k in fields})
    args.config = args.config or str(default_config_path())
    if not Path(args.data).is_dir():
        print(f"complement loop: data directory {args.data!r} not found; pass --data DIR "
              "(JSONL.gz edit pairs, e.g. ../shared/data/commits)", file=sys.stderr)
        return 2
    summary = run_loop(args, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(json.dumps(summary))
    return 0


def register(subparsers: Any) -> None:
    from specialists.tab.loop.runner import LoopArgs

    p = subparsers.add_parser(
        "loop", help="run the online learning loop: deploy → collect → train → gate → swap",
        description="Turns of deploy → collect → train → gate → swap against a real server. "
                    "`complement loop status` prints the deployed version, its lineage and "
                    "the last turns.")
    p.add_argument("action", nargs="?", choices=["run", "status"], default="run")
    p.add_argument("--simulate", action="store_true",
                   help="simulated users replay held-out real edits through the HTTP API")
    defaults = LoopArgs()
    helps = {"config": "base config whose specialists.tab block is served",
             "data": "directory of replayed edits (JSONL.gz per project)",
             "turns": "turns to run (a killed loop resumes its unfinished turn)",
             "events_per_turn": "labelled events to collect per turn",
             "users": "concurrent simulated users", "out": "where loop.json/loop.png go",
             "data_dir": "event store and policy versions (default: OUT/state)",
             "gate_margin": "largest reward-per-request drop the gate lets through"}
    for f in dataclasses.fields(LoopArgs):
        default = getattr(defaults, f.name)
        kind: Callable[[str], Any] = type(default) if default is not None else str
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind,
                       default=default, help=helps.get(f.name, f"(default: {default})"))
    p.set_defaults(func=_loop)


def _train_from_events(ns: argparse.Namespace) -> int:
    from router.config import load_config
    from specialists.tab.events import EventStore
    from specialists.tab.loop.trainer import train_from_events
    from specialists.tab.loop.versions import PolicyStore

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    events = EventStore(config.events.url or _sqlite(state))
    try:
        report = train_from_events(events, PolicyStore(state / "tab"))
    except SpecialistError as exc:
        print(f"complement tab train: {exc.message}", file=sys.stderr)
        return 2
    finally:
        events.close()
    print(json.dumps(dataclasses.asdict(report)))
    return 0


def _sqlite(state: Path) -> str:
    from specialists.tab.events import sqlite_url

    return sqlite_url(state)


def _rollback(ns: argparse.Namespace) -> int:
    import httpx

    from router.config import load_config
    from specialists.tab.loop.versions import PolicyStore

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    store = PolicyStore(state / "tab")
    try:
        store.lineage(ns.version)
    except SpecialistError as exc:
        print(f"complement tab rollback: {exc.message}", file=sys.stderr)
        return 2
    url = ns.server or f"http://{config.server.host}:{config.server.port}"
    try:
        r = httpx.post(f"{url}/v1/tab/deploy", json={"version": ns.version, "event": "rollback"},
                       timeout=120)
    except httpx.TransportError:  # no server running: the next start serves this version
        store.set_deployed(ns.version)
        print(f"no server at {url}; version {ns.version} will be served at the next start")
        return 0
    if r.status_code != 200:
        print(f"complement tab rollback: the server answered {r.status_code}: {r.text}",
              file=sys.stderr)
        return 1
    print(json.dumps(r.json()))
    return 0


def add_tab_commands(tab_sub: Any, train_parser: argparse.ArgumentParser) -> None:
    """``tab train --from-events`` and ``tab rollback``, added to the Tab CLI."""
    offline: Callable[[argparse.Namespace], int] = train_parser.get_default("func")

    def train(ns: argparse.Namespace) -> int:
        return _train_from_events(ns) if ns.from_events else offline(ns)

    train_parser.add_argument("--from-events", action="store_true",
                              help="train the deployed version on its own logged events "
                                   "(the online loop's step) instead of replayed edits")
    train_parser.add_argument("--config", default=None, help="config (for --from-events)")
    train_parser.add_argument("--data-dir", default=None,
                              help="state directory (default: the config's data_dir)")
    train_parser.set_defaults(func=train)
    r = tab_sub.add_parser("rollback", help="serve an earlier policy version again")
    r.add_argument("version", type=int)
    r.add_argument("--config", default=None)
    r.add_argument("--data-dir", default=None, help="state directory (default: data_dir)")
    r.add_argument("--server", default=None, help="server URL (default: from the config)")
    r.set_defaults(func=_rollback)
