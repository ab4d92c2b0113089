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

__all__ = ["add_tab_commands", "live_args", "register"]


def _loop(ns: argparse.Namespace) -> int:
    if ns.action == "status":
        return _status(ns)
    if ns.simulate:
        return _simulated(ns)
    return _live(ns)


def _simulated(ns: argparse.Namespace) -> int:
    from router.config import default_config_path
    from specialists.tab.loop.runner import LoopArgs, resolve, run_loop
    from specialists.tab.loop.trainer import REWARDS

    fields = {f.name for f in dataclasses.fields(LoopArgs)}
    args = LoopArgs(**{k: v for k, v in vars(ns).items() if k in fields and v is not None})
    args.config = args.config or str(default_config_path())
    resolve(args)  # the config's loop.reward and loop.population where no flag gave them
    if args.reward not in REWARDS:
        print(f"complement loop: loop.reward {args.reward!r} is not one of "
              f"{', '.join(REWARDS)}", file=sys.stderr)
        return 2
    if not Path(args.data).is_dir():
        print(f"complement loop: data directory {args.data!r} not found; pass --data DIR "
              "(JSONL.gz edit pairs, e.g. ../shared/data/commits)", file=sys.stderr)
        return 2
    if args.population:  # a bad population file fails here, naming its key, not mid-loop
        from specialists.tab.users import PopulationError, load_population

        try:
            load_population(args.population)
        except PopulationError as exc:
            print(f"complement loop: --population: {exc}", file=sys.stderr)
            return 2
    summary = run_loop(args, serve=_serve, progress=_progress)
    print(json.dumps(summary))
    return 0


def _serve(config: Path, port: int, log: Path) -> Any:
    """The simulated loop's server: ``complement serve`` in a subprocess, once ready."""
    from router.serving import ServeProcess

    return ServeProcess(config, port, log).start()


def live_args(ns: argparse.Namespace) -> Any:
    """The live loop's ``LiveArgs`` from the command line: ``--preset``'s thresholds, and
    any flag given on its own over them."""
    from specialists.tab.loop.live import PRESETS, LiveArgs

    preset = PRESETS[ns.preset]  # a value given on the command line wins over the preset's
    return LiveArgs(min_events=_given(ns.min_events, preset["min_events"]), holdout=ns.holdout,
                    gate_margin=ns.gate_margin if ns.gate_margin is not None
                    else LiveArgs.gate_margin,
                    turns=ns.turns if ns.turns is not None else 0,
                    interval_s=ns.interval, wait_s=ns.wait,
                    canary_share=_given(ns.canary_share, preset["canary_share"]),
                    canary_min_events=_given(ns.canary_min_events, preset["canary_min_events"]),
                    canary_margin=ns.canary_margin)


def _live(ns: argparse.Namespace) -> int:
    """Against the running server of the config: its event store, policy store and URL."""
    from router.config import load_config
    from specialists.tab.loop.live import run_live
    from specialists.tab.loop.versions import PolicyStore

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    args = live_args(ns)
    args.reward = ns.reward or config.loop.reward
    url, key = _server_url(ns, config), _api_key(ns, config)
    events = _events(config, state)

    def canary(action: str, body: dict[str, Any]) -> dict[str, Any]:
        return _post(url, key, "/v1/tab/canary" + ("" if action == "start" else f"/{action}"),
                     body)

    try:
        turns = run_live(args, events, PolicyStore(state / "tab"),
                         lambda version: _deploy(url, key, version, "deploy"),
                         progress=_progress, canary=canary)
    except SpecialistError as exc:
        print(f"complement loop: {exc.message}", file=sys.stderr)
        return 2
    except _ServerError as exc:
        print(f"complement loop: {exc}", file=sys.stderr)
        return 1
    finally:
        events.close()
    print(json.dumps({"turns": [dataclasses.asdict(t) for t in turns]}))
    return 0


def _status(ns: argparse.Namespace) -> int:
    """The simulated loop's state (``--simulate``: OUT/state), or the live server's."""
    from specialists.tab.loop.runner import status

    if ns.simulate:
        state = Path(ns.data_dir) if ns.data_dir else Path(ns.out) / "state"
        print(json.dumps(status(state, ns.out), indent=1))
        return 0
    from router.config import load_config

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    events = _events(config, state)
    try:
        print(json.dumps(status(state, None, events), indent=1))
    finally:
        events.close()
    return 0


def _given(value: Any, preset: Any) -> Any:
    return preset if value is None else value


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _events(config: Any, state: Path) -> Any:
    from specialists.tab.events import EventStore, sqlite_url

    return EventStore(config.events.url or sqlite_url(state), **config.events.store_options())


def _server_url(ns: argparse.Namespace, config: Any) -> str:
    if ns.server:
        return str(ns.server).rstrip("/")
    host = config.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{config.server.port}"


def _api_key(ns: argparse.Namespace, config: Any) -> str | None:
    """``--api-key``, else the admin key (deploys are the admin's: issue 37) from
    ``COMPLEMENT_ADMIN_KEY`` or the config, else ``COMPLEMENT_API_KEY`` or the config's
    first inference key (a server without an admin key)."""
    import os

    admin = [k for k in config.server.admin_keys if k]
    keys = [k for k in config.server.api_keys if k]
    return (ns.api_key or os.environ.get("COMPLEMENT_ADMIN_KEY") or (admin[0] if admin else None)
            or os.environ.get("COMPLEMENT_API_KEY") or (keys[0] if keys else None))


class _ServerError(Exception):
    """The server refused or could not be reached."""


def _deploy(url: str, key: str | None, version: int, event: str) -> dict[str, Any]:
    """Ask the running server to hot-swap ``version`` in (it moves the deployed pointer)."""
    return _post(url, key, "/v1/tab/deploy", {"version": version, "event": event})


def _post(url: str, key: str | None, path: str, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.post(f"{url}{path}", json=body, headers=headers, timeout=120)
    except httpx.TransportError as exc:
        raise _ServerError(f"no server at {url} ({exc}); start it with `complement serve`, "
                           "or pass --server URL") from None
    if r.status_code != 200:
        raise _ServerError(f"the server at {url} answered {r.status_code}: {r.text}")
    return dict(r.json())


def register(subparsers: Any) -> None:
    from specialists.tab.loop.live import PRESETS, LiveArgs
    from specialists.tab.loop.runner import LoopArgs

    p = subparsers.add_parser(
        "loop", help="run the online learning loop: collect → train → gate → swap",
        description="Against the running server of the config (default): wait until the "
                    "deployed Tab version has --min-events labelled events, train it on "
                    "them, gate the candidate on held-out events, and serve it as a canary "
                    "to --canary-share of the editors, promoted to all or rolled back on "
                    "their measured reward; --turns 0 (the default) keeps watching. With --simulate, "
                    "simulated users replay real edits through a server the loop starts. "
                    "`complement loop status` prints versions, events and reward per version "
                    "and the last gate decision.")
    p.add_argument("action", nargs="?", choices=["run", "status"], default="run")
    p.add_argument("--simulate", action="store_true",
                   help="simulated users replay held-out real edits through the HTTP API")
    live = p.add_argument_group("live loop (without --simulate)")
    live.add_argument("--server", default=None,
                      help="the running server's URL (default: from the config)")
    live.add_argument("--api-key", default=None,
                      help="key for the server (default: COMPLEMENT_API_KEY or the config's)")
    small = PRESETS["small-team"]
    live.add_argument("--preset", choices=sorted(PRESETS), default="default",
                      help="traffic thresholds by team size: default (about 2,000 Tab "
                           "requests before a canary decision) or small-team (--min-events "
                           f"{small['min_events']}, --canary-share {small['canary_share']}, "
                           f"--canary-min-events {small['canary_min_events']}); a flag given "
                           "on its own wins")
    live.add_argument("--min-events", type=int, default=None,
                      help=f"labelled events a turn needs (default {LiveArgs.min_events})")
    live.add_argument("--holdout", type=float, default=LiveArgs.holdout,
                      help=f"share of events kept for the gate (default {LiveArgs.holdout})")
    live.add_argument("--interval", type=float, default=LiveArgs.interval_s,
                      help="seconds between looks at the event store while waiting")
    live.add_argument("--wait", type=float, default=None,
                      help="give up waiting for events after this many seconds")
    live.add_argument("--canary-share", type=float, default=None,
                      help="serve a candidate that passed the gate to this share of editors "
                           "first, and promote or roll it back on their measured reward "
                           f"(default {LiveArgs.canary_share}; 0: deploy to everyone at once)")
    live.add_argument("--canary-min-events", type=int, default=None,
                      help="labelled events each canary arm needs before the decision "
                           f"(default {LiveArgs.canary_min_events})")
    live.add_argument("--canary-margin", type=float, default=LiveArgs.canary_margin,
                      help="a canary is rolled back when the 95%% interval of its live "
                           "reward per request minus the deployed version's ends below minus "
                           f"this, else promoted (default {LiveArgs.canary_margin})")
    defaults = LoopArgs()
    helps = {"config": "config of the server (live) or whose specialists.tab block is "
                       "served (--simulate)",
             "data": "--simulate: directory of replayed edits (JSONL.gz per project)",
             "turns": "turns to run (default: live 0 = keep watching, --simulate 3; a "
                      "killed simulated loop resumes its unfinished turn)",
             "events_per_turn": "--simulate: labelled events to collect per turn",
             "users": "--simulate: concurrent simulated users",
             "out": "--simulate: where loop.json/loop.png go",
             "data_dir": "event store and policy versions (default: live, the config's "
                         "data_dir; --simulate, OUT/state)",
             "gate_margin": "largest reward-per-request drop the gate lets through: a candidate "
                            "ships when the 95%% confidence interval of its paired difference "
                            "from the deployed version starts above minus this",
             "max_staleness": "--simulate: also train on the last N ancestor versions' events, "
                              "importance-weighted (default 0: on-policy only)",
             "is_clip": "--simulate: clip of a stale event's importance weight (default 1.0)",
             "q_model": "--simulate: train with a ridge regression of reward over the lineage's "
                        "events as the update's control variate: it reaches actions the policy "
                        "seldom draws (default off)",
             "population": "--simulate: a population file (configs/users/*.yaml): the simulated "
                           "users are its people and the gate replays with them (default: the "
                           "config's loop.population, else oracles, who accept exactly the "
                           "real next text)",
             "reward": "what the trainer, the gate and the canary score events by: kept "
                       "(characters still there by the editor's final report; dismissals, "
                       "undos and Tab switched off cost) or accept (the accept key, "
                       "+0.75/-0.25) (default: the config's loop.reward, kept)"}
    for f in dataclasses.fields(LoopArgs):
        default = getattr(defaults, f.name)
        kind: Callable[[str], Any] = type(default) if default is not None else str
        if f.name == "reward":
            from specialists.tab.loop.trainer import REWARDS

            p.add_argument("--reward", dest="reward", choices=REWARDS, default=None,
                           help=helps["reward"])
            continue
        if isinstance(default, bool):
            p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=default,
                           action=argparse.BooleanOptionalAction, help=helps[f.name])
            continue
        if f.name in ("turns", "gate_margin"):  # each mode has its own default
            p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind,
                           default=None, help=helps[f.name])
            continue
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind,
                       default=default, help=helps.get(f.name, f"--simulate (default: {default})"))
    p.set_defaults(func=_loop)


def _train_from_events(ns: argparse.Namespace) -> int:
    from router.config import load_config
    from specialists.tab.loop.trainer import named_reward, train_from_events
    from specialists.tab.loop.versions import PolicyStore

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    events = _events(config, state)
    try:
        report = train_from_events(events, PolicyStore(state / "tab"),
                                   reward=named_reward(config.loop.reward))
    except SpecialistError as exc:
        print(f"complement tab train: {exc.message}", file=sys.stderr)
        return 2
    finally:
        events.close()
    print(json.dumps(dataclasses.asdict(report)))
    return 0


def _rollback(ns: argparse.Namespace) -> int:
    from router.config import load_config
    from router.service.tab import TabService
    from specialists.tab.loop.versions import PolicyStore

    config = load_config(ns.config)
    state = Path(ns.data_dir) if ns.data_dir else config.data_path()
    store = PolicyStore(state / "tab")
    try:
        store.lineage(ns.version)
    except SpecialistError as exc:
        print(f"complement tab rollback: {exc.message}", file=sys.stderr)
        return 2
    url = _server_url(ns, config)
    try:
        answer = _deploy(url, _api_key(ns, config), ns.version, "rollback")
    except _ServerError as exc:
        if "no server at" not in str(exc):
            print(f"complement tab rollback: {exc}", file=sys.stderr)
            return 1
        TabService(None, state).deploy_at_next_start(ns.version)  # the next start serves it
        print(f"no server at {url}; version {ns.version} will be served at the next start")
        return 0
    print(json.dumps(answer))
    return 0


def add_tab_commands(tab_sub: Any, train_parser: argparse.ArgumentParser) -> None:
    """``tab train --from-events`` and ``tab rollback``, added to the Tab CLI."""
    offline: Callable[[argparse.Namespace], int] = train_parser.get_default("func")

    def train(ns: argparse.Namespace) -> int:
        return _train_from_events(ns) if ns.from_events else offline(ns)

    train_parser.add_argument("--from-events", action="store_true",
                              help="train the deployed version on its own logged events "
                                   "by a PPO-clip update (the online loop's step) instead of "
                                   "REINFORCE on replayed edits")
    train_parser.add_argument("--config", default=None, help="config (for --from-events)")
    train_parser.add_argument("--data-dir", default=None,
                              help="state directory (default: the config's data_dir)")
    train_parser.set_defaults(func=train)
    r = tab_sub.add_parser("rollback", help="serve an earlier policy version again")
    r.add_argument("version", type=int)
    r.add_argument("--config", default=None)
    r.add_argument("--data-dir", default=None, help="state directory (default: data_dir)")
    r.add_argument("--server", default=None, help="server URL (default: from the config)")
    r.add_argument("--api-key", default=None,
                   help="key for the server (default: COMPLEMENT_API_KEY or the config's)")
    r.set_defaults(func=_rollback)
