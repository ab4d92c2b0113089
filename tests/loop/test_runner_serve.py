"""The simulated loop trains against the server its caller starts (issue 39).

``specialists.tab.loop.runner`` sits below the router: it used to start
``python -m router.cli serve`` itself, an upward dependency no import contract could see.
Now ``run_loop`` takes ``serve`` from its caller (``complement loop --simulate`` passes
``router.serving.ServeProcess``); here the caller serves the router's app in this process
instead, and a whole turn runs against it: events collected over HTTP, a version trained,
gated, and deployed through the server's Tab service.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from router.app import create_app
from router.config import load_config
from router.serving import running
from specialists.tab.events import EventStore, sqlite_url
from specialists.tab.loop.runner import LoopArgs, run_loop
from specialists.tab.loop.versions import PolicyStore


class InProcess:
    """The caller's server: the router's app on a thread of this process."""

    def __init__(self, config: Path) -> None:
        self.stack = contextlib.ExitStack()
        self.url = self.stack.enter_context(running(create_app(load_config(config))))

    def stop(self) -> None:
        self.stack.close()


def test_run_loop_trains_against_the_server_its_caller_starts(tmp_path: Path,
                                                              tiny_checkpoint: Path,
                                                              toy_data: Path) -> None:
    started: list[tuple[Path, int, Path]] = []

    def serve(config: Path, port: int, log: Path) -> Any:
        started.append((config, port, log))
        return InProcess(config)

    out = tmp_path / "run"
    args = LoopArgs(data=str(toy_data), checkpoint=str(tiny_checkpoint), turns=1,
                    events_per_turn=30, users=2, collect_split="toy", gate_split="toy",
                    gate_pairs=2, out=str(out))
    summary = run_loop(args, serve=serve, progress=lambda msg: None)
    assert summary["turns_run"] == 1 and len(started) == 1
    config, port, log = started[0]
    assert config.parent == out / "state" and log.parent == out / "state" and port > 0
    turn = json.loads((out / "loop.json").read_text())["turns"][0]
    assert turn["extra"]["acknowledged"] == turn["extra"]["stored"] >= 30  # all in the store
    store = PolicyStore(out / "state" / "tab")
    assert turn["new_version"] in store.versions()
    events = EventStore(sqlite_url(out / "state"))
    try:
        log_events = [d["event"] for d in events.deploy_log(20)]
    finally:
        events.close()
    if turn["shipped"]:  # deployed through the server's API: its Tab service logged it
        assert store.deployed() == turn["new_version"] and "deploy" in log_events
    else:
        assert store.deployed() == turn["deployed"] and "deploy" not in log_events
