"""What every security probe shares: a real server for a config, a canary listener, a tally.

A probe (one module per finding of issue 41, ``router/audit/f*.py``) is a function
``probe(tmp: Path) -> Tally``: it writes the files and config it needs under ``tmp``, starts
the real server over HTTP on loopback (:func:`serve`), attacks it the way the finding was
reproduced by hand, and counts what it tried and what got through. ``tests/security`` runs
each probe and asserts its tally is clean, besides narrower tests of its own;
``complement audit`` and ``benchmarks/reliability.py --only security`` run them all and
print the totals. ``free_port`` and ``running`` are ``router.serving``'s, named here too.

The counts:

``attempts``        requests (or connections) the probe sent as an attack
``leaks``           secrets seen where they must not be (a canary key at a listener, a
                    secret file's text in an answer, an absolute path shown without a key)
``writes_outside``  files created, changed or removed outside what the request named
``commands_run``    commands an attacker got run (a sentinel file a payload would create)
``failures``        every other broken expectation, as text (a 5xx, an accepted request
                    that should have been refused, a hang)
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from router.serving import free_port, running

__all__ = ["Tally", "free_port", "running", "serve", "snapshot", "changed", "offline_env"]


def offline_env() -> None:
    """No network, ever: litellm's cost map is the local one and no hub is asked (called
    by :func:`serve` and ``run_all`` before anything loads litellm or a model)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")



@dataclass
class Tally:
    """What one probe tried and what got through (see the module docstring)."""

    name: str
    attempts: int = 0
    leaks: int = 0
    writes_outside: int = 0
    commands_run: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.leaks or self.writes_outside or self.commands_run or self.failures)

    def expect(self, condition: bool, what: str) -> bool:
        """Record ``what`` as a failure unless ``condition`` holds; returns ``condition``."""
        if not condition:
            self.failures.append(what)
        return condition

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "attempts": self.attempts, "leaks": self.leaks,
                "writes_outside": self.writes_outside, "commands_run": self.commands_run,
                "failures": list(self.failures), "ok": self.ok}


@contextmanager
def serve(config: dict[str, Any], *, host: str | None = None) -> Iterator[str]:
    """The real app for ``config`` (a config mapping, as YAML would give it; no environment
    is read), served over HTTP on loopback; yields its base URL."""
    offline_env()
    from router.app import create_app
    from router.config import parse_config
    from router.serving import uvicorn_options

    cfg = parse_config(config, env={})
    with running(create_app(cfg), host=host or "127.0.0.1", **uvicorn_options(cfg)) as url:
        yield url


def snapshot(root: Path) -> dict[str, str]:
    """Every file and link under ``root`` (dot-folders too) -> a digest of what it holds."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                seen[rel] = "link:" + os.readlink(full)
                continue
            try:
                with open(full, "rb") as f:
                    seen[rel] = hashlib.sha256(f.read()).hexdigest()
            except OSError as exc:
                seen[rel] = f"unreadable:{exc.errno}"
    return seen


def changed(before: dict[str, str], after: dict[str, str],
            allowed: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Paths created, changed or removed between two snapshots, less those ``allowed``."""
    paths = set(before) | set(after)
    return sorted(p for p in paths if before.get(p) != after.get(p) and p not in allowed)
