"""The simulated loop trains against the server its caller starts (issue 39).

``specialists.tab.loop.runner`` sits below the router: it used to start
``python -m router.cli serve`` itself, an upward dependency no import contract could see.
Now ``run_loop`` takes ``serve`` from its caller (``complement loop --simulate`` passes
``router.serving.ServeProcess``); here the caller serves the router's app in this process
instead, and a whole turn runs against it: events collected over HTTP, a version trained,
gated, and deployed through the server's Tab service.
"""

from __future__ import annotations

import ast
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

REPO = Path(__file__).resolve().parents[2]


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


def _code_strings(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def _names_the_router(text: str) -> bool:
    """A module path of the router (``router.cli``, ``router.api.tab:x``), as ``python -m``
    or ``importlib`` would take it."""
    head = text.split(":")[0]
    return head == "router" or (head.startswith("router.")
                                and all(p.isidentifier() for p in head.split(".")))


def test_nothing_below_the_router_names_a_router_module_in_code() -> None:
    """What import-linter cannot see: a module path in a string (``-m router.cli``, an
    ``import_module``) from specialists/ or retrieval/."""
    found = [(str(path.relative_to(REPO)), text)
             for package in ("specialists", "retrieval")
             for path in sorted((REPO / package).rglob("*.py"))
             for text in _code_strings(path) if _names_the_router(text)]
    assert found == [], f"take the router's part from the caller instead: {found}"
    assert _names_the_router("router.cli") and _names_the_router("router.api.tab:router")
    assert not _names_the_router("router above the specialists")
