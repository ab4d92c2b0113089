"""``complement loop``: turns of deploy → collect → train → gate → swap, each one recorded.

The server is a real ``complement serve`` subprocess, started by the caller's ``serve``
(:data:`Serve`); with ``--simulate`` a population of simulated users drives its HTTP API,
and a version that passes the gate is deployed through that API (the server's Tab service
swaps it in). The loop's own state lives on disk (the policy store
and the event store), so a loop killed mid-turn resumes where it stopped: the events the
deployed version already collected count toward the turn.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from specialists.tab.events import EventStore
from specialists.tab.loop.versions import PolicyStore

__all__ = ["LoopArgs", "LoopServer", "Serve", "resolve", "run_loop", "status"]


@dataclass
class LoopArgs:
    config: str | None = None
    """Base config; its ``specialists.tab`` block is served (default: configs/default.yaml)."""
    data: str = "../shared/data/commits"
    """Replayed edits (JSONL.gz per project)."""
    checkpoint: str | None = None
    """LM + first policy (default: the shipped checkpoint in specialists/tab/checkpoint)."""
    turns: int = 3
    events_per_turn: int = 600
    users: int = 4
    """Concurrent simulated users."""
    collect_split: str = "test"
    """Projects whose edits the simulated users make (held out from the policy's training)."""
    gate_split: str = "dev"
    gate_pairs: int = 40
    """Gate edits per gate project: enough that the paired interval can tell the changes apart."""
    gate_margin: float = 0.005
    port: int = 0
    out: str = "runs/loop"
    data_dir: str | None = None
    """Where the loop keeps its event store and policy versions (default: <out>/state)."""
    seed: int = 0
    feedback_timeout_s: float = 120.0
    max_staleness: int = 0
    """Train on the events of the deployed version's last N ancestors too, importance-weighted
    (0: on-policy only, DESIGN.md's rule)."""
    is_clip: float = 1.0
    """Clip of a stale event's importance weight (with ``max_staleness`` > 0)."""
    q_model: bool = False
    """Train with a regression of reward over the lineage's events as the control variate
    (``train_from_events(q_model=True)``; issue 35)."""
    population: str | None = None
    """A population file (``configs/users/*.yaml``, issue 35) whose people the simulated
    users are, and the gate's replays too (None: the config's ``loop.population``, else
    oracles: the replay's judgement, as before)."""
    reward: str | None = None
    """What the trainer and the gate score by: ``kept`` or ``accept`` (None: the config's
    ``loop.reward``, default ``kept``)."""


@dataclass
class Turn:
    turn: int
    deployed: int
    events: int = 0
    off_policy_refused: int = 0
    show_rate: float = 0.0
    accept_rate: float = 0.0
    reward_per_request: float = 0.0
    collect_s: float = 0.0
    train_s: float = 0.0
    gate_swap_s: float = 0.0
    turnaround_s: float = 0.0
    new_version: int | None = None
    shipped: bool = False
    gate: str = ""
    requests_per_s: float = 0.0
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    reward: str = "kept"
    """The reward ``reward_per_request`` and the gate's figures are (``LoopArgs.reward``)."""
    chars_kept_per_1000: float = 0.0
    """Accepted characters still there after the kept window per 1,000 keystrokes the
    users' edits needed, beside the reward: a policy that wins reward by showing less is
    visible here."""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_config(args: LoopArgs, state: Path, store: PolicyStore, port: int) -> Path:
    # the CLI fills ``config`` with the default config's path; a bare LoopArgs serves the
    # Tab block alone with every other setting at its default
    base = (yaml.safe_load(Path(args.config).read_text()) or {}) if args.config else {}
    spec = (base.get("specialists") or {}).get("tab") or {"class": "specialists.tab:TabSpecialist"}
    options = dict(spec.get("options") or {})
    deployed = store.deployed()
    assert deployed is not None, "bootstrap deploys a version first"
    options.update(policy=str(store.path(deployed)), sample=True, log_features=True)
    if args.checkpoint:
        options["checkpoint"] = str(Path(args.checkpoint).resolve())
    base["specialists"] = {"tab": {**spec, "options": options}}
    base["routes"] = {}
    base["data_dir"] = str(state)
    base["server"] = {"host": "127.0.0.1", "port": port}
    base["events"] = {"url": "", "feedback_timeout_s": args.feedback_timeout_s}
    path = state / "server.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


class LoopServer(Protocol):
    """The server the loop trains against, started: simulated users send it requests and
    feedback at ``url``, and :func:`deploy` swaps a version in through its API."""

    url: str

    def stop(self) -> None: ...


Serve = Callable[[Path, int, Path], LoopServer]
"""Starts the loop's server from its config file, port and log file and returns once it
answers. The caller's: ``complement loop --simulate`` passes the router's
``router.serving.ServeProcess`` (``complement serve`` in a subprocess); this package never
names the router, which sits above it."""


def _bootstrap(store: PolicyStore, checkpoint: Path) -> int:
    """Deploy the checkpoint's policy as the first version, once."""
    deployed = store.deployed()
    if deployed is not None:
        return deployed
    from specialists.tab.loop.versions import publish_policy
    from specialists.tab.policy import TabPolicy

    policy = TabPolicy.load(checkpoint)
    publish_policy(store, checkpoint, policy.version,
                   {"parent": None, "source": str(checkpoint), "events_used": 0})
    store.set_deployed(policy.version)
    return policy.version


def deploy(server_url: str, version: int) -> dict[str, Any]:
    import httpx

    r = httpx.post(f"{server_url}/v1/tab/deploy", json={"version": version}, timeout=120)
    r.raise_for_status()
    return dict(r.json())


def _turn_pairs(pool: list[Any], turn: int, seed: int, k: int) -> list[Any]:
    rng = random.Random(f"{seed}:{turn}")
    return rng.sample(pool, min(k, len(pool)))


def run_loop(args: LoopArgs, serve: Serve, progress: Any = print) -> dict[str, Any]:
    """``args.turns`` turns against the server ``serve`` starts (see :data:`Serve`); the
    summary of every turn run in ``args.out`` so far."""
    from specialists.tab.loop.gate import Gate
    from specialists.tab.loop.simulate import simulate
    from specialists.tab.loop.trainer import train_from_events
    from specialists.tab.data import load_split
    from specialists.tab.lm import TabLM
    from specialists.tab.specialist import DEFAULT_CHECKPOINT

    out = Path(args.out)
    state = Path(args.data_dir) if args.data_dir else out / "state"
    state.mkdir(parents=True, exist_ok=True)
    store = PolicyStore(state / "tab")
    checkpoint = Path(args.checkpoint) if args.checkpoint else DEFAULT_CHECKPOINT
    _bootstrap(store, checkpoint)
    from specialists.tab.events import sqlite_url

    events = EventStore(sqlite_url(state), feedback_timeout_s=args.feedback_timeout_s)
    collect_pool = load_split(args.data, args.collect_split)
    gate_pairs = load_split(args.data, args.gate_split, limit_per_project=args.gate_pairs,
                            seed=args.seed)
    progress(f"loop: {len(collect_pool)} edits to replay ({args.collect_split}), "
             f"{len(gate_pairs)} gate edits ({args.gate_split})")
    lm = TabLM(checkpoint).load()
    resolve(args)
    from specialists.tab.loop.trainer import named_reward

    population = None
    if args.population:
        from specialists.tab.users import load_population

        population = load_population(args.population)
    # the gate replays with the people the deployment serves, scored as the trainer scores
    gate = Gate(gate_pairs, lm, margin=args.gate_margin, seed=args.seed, population=population,
                reward=named_reward(str(args.reward)))
    port = args.port or _free_port()
    server = serve(_server_config(args, state, store, port), port, state / "server.log")
    log_path = out / "loop.json"
    turns: list[dict[str, Any]] = _previous_turns(log_path)
    if population is not None:  # the same people every turn: their patience carries over
        from functools import partial

        from specialists.tab.users import World

        simulate = partial(simulate, world=World(population, seed=args.seed, people=args.users))
    try:
        for t in range(len(turns), len(turns) + args.turns):
            row = _one_turn(t, args, server, store, events, gate, collect_pool, progress,
                            simulate, train_from_events)
            turns.append(asdict(row))
            _write_log(log_path, turns)
            plot_turns(turns, out / "loop.png")
    finally:
        server.stop()
        events.close()
    return _summary(turns)


def resolve(args: LoopArgs) -> None:
    """``reward`` and ``population`` not given: the config's ``loop`` block's."""
    base = (yaml.safe_load(Path(args.config).read_text()) or {}) if args.config else {}
    loop = base.get("loop") or {}
    args.reward = args.reward or loop.get("reward") or "kept"
    args.population = args.population or loop.get("population") or None


def _one_turn(t: int, args: LoopArgs, server: LoopServer, store: PolicyStore, events: EventStore,
              gate: Any, pool: list[Any], progress: Any, simulate: Any,
              train_from_events: Any) -> Turn:
    t0 = time.monotonic()
    deployed = store.deployed()
    assert deployed is not None
    row = Turn(turn=t, deployed=deployed, reward=str(args.reward))
    have = _collected_this_turn(events, t)
    need = max(0, args.events_per_turn - have)
    before = events.counts()["actions"]
    if have == 0:  # a fresh turn (not a resumed one): mark where its events begin
        events.record_deploy(str(deployed), "turn_start", turn=t, actions=before)
    progress(f"turn {t}: version {deployed} deployed; collecting {need} events "
             f"({have} already on disk)")
    pairs = _turn_pairs(pool, t, args.seed, k=len(pool))
    stats = simulate(server.url, pairs, users=args.users, max_requests=need)
    events.expire_stale()
    row.collect_s = time.monotonic() - t0
    # every /v1/tab answer the users got was acknowledged: it must be in the store
    row.extra = {"acknowledged": stats.requests,
                 "stored": events.counts()["actions"] - before,
                 "feedback_acknowledged": stats.feedback_sent}
    if args.population:  # what the people kept, beside the reward the trainer sees (issue 35)
        summary = stats.summary()
        row.extra.update(population=args.population, collect_accept_rate=summary["accept_rate"],
                         collect_kept_reward_per_request=summary["kept_reward_per_request"],
                         collect_chars_kept=stats.chars_kept,
                         collect_chars_kept_per_1000=summary["chars_kept_per_1000"],
                         switched_off=stats.switched_off,
                         tab_off=stats.tab_off)
    row.requests_per_s = stats.summary()["requests_per_s"]
    row.chars_kept_per_1000 = stats.summary()["chars_kept_per_1000"]
    row.errors = len(stats.errors)
    t1 = time.monotonic()
    from specialists.tab.loop.trainer import named_reward
    from specialists.tab.policy import PPOConfig

    report = train_from_events(events, store, reward=named_reward(str(args.reward)),
                               ppo=PPOConfig(max_staleness=args.max_staleness,
                                             is_clip=args.is_clip), q_model=args.q_model)
    row.train_s = time.monotonic() - t1
    row.events, row.off_policy_refused = report.events_used, report.off_policy_refused
    row.show_rate, row.accept_rate = round(report.show_rate, 4), round(report.accept_rate, 4)
    row.reward_per_request, row.new_version = round(report.reward_mean, 4), report.version
    t2 = time.monotonic()
    result = gate.check(store.path(report.version), report.version, store.path(deployed),
                        deployed)
    row.gate = result.reason
    # the same fixed held-out replays every turn: comparable across turns, unlike the live
    # reward, which depends on which edits the users happened to make
    row.extra.update(gate_reward_deployed=round(result.reward_deployed, 4),
                     gate_reward_candidate=round(result.reward_candidate, 4),
                     gate_difference=round(result.difference, 4),
                     gate_ci=[round(result.ci_low, 4), round(result.ci_high, 4)])
    events.record_deploy(str(report.version), "gate_passed" if result.passed else "gate_failed",
                         reason=result.reason, parent=deployed, **result.summary())
    if result.passed:  # the server's Tab service swaps it in and moves the deployed pointer
        deploy(server.url, report.version)
        row.shipped = True
    row.gate_swap_s = time.monotonic() - t2
    row.turnaround_s = time.monotonic() - t0
    events.record_deploy(str(store.deployed()), "turn", turn=t,
                         turnaround_s=round(row.turnaround_s, 3))
    progress(f"turn {t}: {row.events} events (refused {row.off_policy_refused} off-policy), "
             f"show {row.show_rate:.3f} accept {row.accept_rate:.3f} {row.reward} reward "
             f"{row.reward_per_request:+.4f}, {row.chars_kept_per_1000:g} characters kept per "
             f"1,000 keystrokes; {result.reason}; turnaround "
             f"{row.turnaround_s:.1f}s")
    return row


def _collected_this_turn(events: EventStore, turn: int) -> int:
    """Events already logged by an interrupted run of ``turn`` (0 for a fresh turn)."""
    for entry in events.deploy_log(50):
        if entry["event"] == "turn_start" and entry.get("turn") == turn:
            return events.counts()["actions"] - int(entry["actions"])
    return 0


def _previous_turns(path: Path) -> list[dict[str, Any]]:
    if path.exists():
        try:
            return list(json.loads(path.read_text())["turns"])
        except (ValueError, KeyError):
            return []
    return []


def _write_log(path: Path, turns: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"turns": turns, **_summary(turns)}, indent=1))
    os.replace(tmp, path)


def _summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    import statistics

    return {"median_turnaround_s": round(statistics.median(t["turnaround_s"] for t in turns), 2)
            if turns else None, "turns_run": len(turns)}


def plot_turns(turns: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [t["turn"] for t in turns]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(x, [t["reward_per_request"] for t in turns], "o-")
    axes[0].set_title("reward per request")
    axes[1].plot(x, [t["accept_rate"] for t in turns], "o-", label="accept rate")
    axes[1].plot(x, [t["show_rate"] for t in turns], "s-", label="show rate")
    axes[1].legend()
    axes[1].set_title("accept and show rate")
    for key, label in (("collect_s", "collect"), ("train_s", "train"),
                       ("gate_swap_s", "gate+swap"), ("turnaround_s", "total")):
        axes[2].plot(x, [t[key] for t in turns], "o-", label=label)
    axes[2].legend()
    axes[2].set_title("seconds per turn")
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.set_xlabel("turn")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _not_deployed(store: PolicyStore, in_lineage: set[Any], canary: dict[str, Any] | None,
                  log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The versions on disk outside the deployed lineage, newest first, each with its
    parent and why it is not served (issue 40: ``lineage`` listed 160 while 161 and 162
    existed, and nothing said what became of them): the canary now, the last decision the
    deploy log holds for it (``gate_failed``, ``canary_failed``, a rollback), or
    ``not deployed``."""
    last: dict[str, str] = {}
    for entry in log:  # newest first; the log keeps versions as text
        if entry["event"] not in ("turn", "turn_start"):  # a turn names the deployed one
            last.setdefault(str(entry.get("version")), entry["event"])
    out = []
    for v in sorted(store.versions(), reverse=True):
        if v in in_lineage:
            continue
        lineage = store.lineage(v)
        why = ("serving as the canary" if canary and canary.get("version") == v
               else last.get(str(v), "not deployed"))
        out.append({"version": v, "parent": lineage.get("parent"), "status": why})
    return out[:20]


def status(data_dir: str | Path, out: str | Path | None = None,
           events: EventStore | None = None) -> dict[str, Any]:
    """The deployed version, its lineage and any canary; with ``events``, every version's
    labelled events and reward, and the last gate and canary decisions; the last turns of
    either loop."""
    from specialists.tab.loop.live import live_log, read_turns

    store = PolicyStore(Path(data_dir) / "tab")
    deployed = store.deployed()
    info: dict[str, Any] = {"deployed": deployed, "canary": store.canary(),
                            "versions": store.versions()}
    log: list[dict[str, Any]] = []
    if events is not None:
        info["events_per_version"] = events.version_stats()
        log = events.deploy_log(200)
        gates = [d for d in log if d["event"] in ("gate_passed", "gate_failed")]
        info["last_gate"] = gates[0] if gates else None
        canaries = [d for d in log if d["event"] in ("canary_passed", "canary_failed")]
        info["last_canary"] = canaries[0] if canaries else None
        info["pending_feedback"] = events.pending()
    live = read_turns(live_log(store))
    if live:
        info["live_turns"] = live[-5:]
    if deployed is not None:
        chain: list[dict[str, Any]] = []
        v: int | None = deployed
        while v is not None and len(chain) < 20:
            lineage = store.lineage(v)
            chain.append(lineage)
            v = lineage.get("parent")
        info["lineage"] = chain
        info["not_deployed"] = _not_deployed(store, {c.get("version") for c in chain},
                                             info.get("canary"), log)
    if out is not None and (Path(out) / "loop.json").exists():
        info["last_turns"] = json.loads((Path(out) / "loop.json").read_text())["turns"][-5:]
    return info
