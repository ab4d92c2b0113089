"""Fixtures for the edit pipeline: a frontier client on the fake provider and on the replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.config import parse_config
from router.edit.sandbox import sandbox_problem
from router.frontier import FrontierClient
from tests.fakes.fake_frontier import FakeFrontier

BEFORE = '''import os


def greet(name):
    return "hello " + name


def add(a, b):
    return a + b


def main():
    print(greet("world"))
    print(add(1, 2))


if __name__ == "__main__":
    main()
'''

AFTER = BEFORE.replace('    return "hello " + name\n',
                       '    """Say hello."""\n    return f"hello {name}"\n')


SANDBOX = "bwrap" if sandbox_problem("bwrap") is None else "none"
"""The sandbox the verification tests that are not about it run commands in: bubblewrap
where it works (CI installs it), else none, so they still test the cascade; whether
verification is contained, or fails closed without bubblewrap, is tests/security's."""


def fake_config(fake: FakeFrontier, data_dir: Path | None = None,
                roots: list[Path] | None = None, verify: dict[str, Any] | None = None) -> Any:
    """The fake provider's routes, the real applier, and the repositories under ``roots``."""
    return parse_config({
        "workspace": {"allowed_roots": [str(r) for r in roots or []],
                      "verify": {"sandbox": SANDBOX, **(verify or {})}},
        "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}},
        "data_dir": str(data_dir or "/nonexistent"),
        "frontier": {"retry": {"attempts": 1, "backoff_initial_s": 0.01, "backoff_max_s": 0.02}},
        "models": {
            "fake": {"model": "openai/fake-sonnet", "api_base": fake.url, "api_key": "k",
                     "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5},
            "replay": {"model": "replay/claude-sonnet-4-5", "requires_key": False},
            "keyless": {"model": "openai/gpt-5", "api_key": "${OPENAI_API_KEY:-}"},
        },
        "routes": {"edit": {"targets": ["fake"]},
                   "replayed": {"targets": ["replay"]},
                   "fallback": {"targets": ["keyless", "fake"]}},
    }, env={})


@pytest.fixture
def client(fake: FakeFrontier) -> FrontierClient:
    cfg = fake_config(fake)
    return FrontierClient(cfg.models, cfg.frontier, cfg.env_refs)


def fenced(text: str, path: str = "app.py") -> str:
    return f"text:```python {path}\n{text}```\n"
