"""The Tab service (issue 39): the one owner of which policy a server serves.

Its deploys, canaries and start-up sync on a real policy store, a real event store
(SQLite) and the shipped policy files, with a stand-in specialist that records what it was
asked to serve; and a check of the tree that nothing else in the router swaps a policy or
moves the deployed pointer. The endpoints over HTTP are tested in tests/loop (deploy,
canary, the workers' follower) and tests/router/test_keys.py (who may deploy).
"""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from router.errors import Conflict
from router.service.tab import TabService
from specialists.base import NotFoundError, Result
from specialists.tab.events import EventStore, sqlite_url
from specialists.tab.policy import TabPolicy
from specialists.tab.specialist import DEFAULT_CHECKPOINT, Canary

REPO = Path(__file__).resolve().parents[2]
SHIPPED = int(json.loads((DEFAULT_CHECKPOINT / "policy.json").read_text())["version"])


class Swapping:
    """A Tab specialist's policy half: serves one policy (and maybe a canary), swaps."""

    def __init__(self) -> None:
        self.policy = TabPolicy.load(DEFAULT_CHECKPOINT)
        self.policy_path = DEFAULT_CHECKPOINT
        self.canary: Canary | None = None
        self.swapped: list[int] = []

    def answer(self, request: Any) -> Result:  # the contract's one method; unused here
        raise AssertionError("not asked")

    def swap(self, policy: Any) -> int:
        old, self.policy, self.canary = self.policy, policy, None
        self.swapped.append(int(policy.version))
        return int(old.version)

    def set_canary(self, policy: Any | None, share: float = 0.0) -> None:
        self.canary = Canary(policy, share) if policy is not None else None


class Fixed:
    """A specialist that cannot swap its policy."""

    def answer(self, request: Any) -> Result:
        raise AssertionError("not asked")


def _publish_candidate(service: TabService, tmp: Path) -> int:
    """A second version of the shipped policy in the store (its files, a new number)."""
    candidate = tmp / "candidate"
    candidate.mkdir()
    for name in ("policy.json", "policy.safetensors"):
        shutil.copy2(DEFAULT_CHECKPOINT / name, candidate / name)
    meta = json.loads((candidate / "policy.json").read_text())
    meta["version"] = SHIPPED + 1
    (candidate / "policy.json").write_text(json.dumps(meta))
    service.store.publish(candidate, SHIPPED + 1, {"parent": SHIPPED, "source": "test"})
    return SHIPPED + 1


@pytest.fixture
def events(tmp_path: Path) -> Any:
    store = EventStore(sqlite_url(tmp_path / "events"))
    yield store
    store.close()


def test_a_first_start_publishes_the_loaded_policy_and_a_later_one_serves_the_store(
        tmp_path: Path) -> None:
    spec = Swapping()
    service = TabService(spec, tmp_path / "data")
    assert service.sync_at_start() == SHIPPED
    assert service.store.versions() == [SHIPPED] and service.store.deployed() == SHIPPED
    assert spec.swapped == []  # it already serves what it published
    candidate = _publish_candidate(service, tmp_path)
    service.deploy_at_next_start(candidate)  # `complement tab rollback` with no server up
    restarted = Swapping()
    assert TabService(restarted, tmp_path / "data").sync_at_start() == candidate
    assert restarted.swapped == [candidate] and restarted.policy.version == candidate


def test_deploy_swaps_moves_the_pointer_ends_a_canary_and_logs(tmp_path: Path,
                                                               events: Any) -> None:
    spec = Swapping()
    service = TabService(spec, tmp_path / "data", events)
    service.sync_at_start()
    candidate = _publish_candidate(service, tmp_path)
    started = asyncio.run(service.start_canary(candidate, 0.25))
    assert started["canary"]["version"] == candidate and started["deployed"] == SHIPPED
    assert spec.canary is not None and spec.canary.share == 0.25
    answer = asyncio.run(service.deploy(candidate))
    assert answer == {"deployed": candidate, "previous": SHIPPED, "event": "deploy"}
    assert spec.swapped == [candidate] and service.store.deployed() == candidate
    assert service.store.canary() is None and spec.canary is None
    back = asyncio.run(service.deploy(SHIPPED, "rollback"))
    assert back["previous"] == candidate and service.store.deployed() == SHIPPED
    logged = [(d["event"], d["version"]) for d in service.versions()["deploys"]]
    assert logged[:3] == [("rollback", str(SHIPPED)), ("deploy", str(candidate)),
                          ("canary_start", str(candidate))]


def test_what_cannot_be_deployed_is_refused_before_anything_changes(tmp_path: Path) -> None:
    spec = Swapping()
    service = TabService(spec, tmp_path / "data")
    service.sync_at_start()
    with pytest.raises(NotFoundError, match=f"known: \\[{SHIPPED}\\]"):
        asyncio.run(service.deploy(4242))
    with pytest.raises(Conflict, match="is the deployed version"):
        asyncio.run(service.start_canary(SHIPPED, 0.5))
    with pytest.raises(Conflict, match="no canary is running"):
        asyncio.run(service.promote())
    assert asyncio.run(service.abort()) == {"aborted": None, "deployed": SHIPPED}
    fixed = TabService(Fixed(), tmp_path / "data")
    with pytest.raises(Conflict, match="cannot hot-swap"):
        asyncio.run(fixed.deploy(SHIPPED))
    with pytest.raises(Conflict, match="cannot serve a canary"):
        asyncio.run(fixed.start_canary(SHIPPED, 0.5))
    assert spec.swapped == [] and service.store.deployed() == SHIPPED
    assert fixed.sync_at_start() is None  # nothing to publish from a fixed policy


def test_a_canary_promoted_is_deployed_to_everyone(tmp_path: Path) -> None:
    spec = Swapping()
    service = TabService(spec, tmp_path / "data")
    service.sync_at_start()
    candidate = _publish_candidate(service, tmp_path)
    asyncio.run(service.start_canary(candidate, 0.5))
    # a second worker process of the same data directory follows the store's canary
    other = Swapping()
    follower = TabService(other, tmp_path / "data")
    assert follower.sync_canary() is True and other.canary is not None
    assert follower.sync_canary() is False  # already served
    promoted = asyncio.run(service.promote())
    assert promoted["deployed"] == candidate and promoted["event"] == "canary_promoted"
    assert spec.policy.version == candidate and service.store.canary() is None
    assert follower.sync_canary() is True and other.canary is None  # the canary ended


# -- nothing else swaps ------------------------------------------------------------------
SWAPS = {"swap", "set_canary"}
"""Calls that change what a specialist serves."""
POINTER = {"set_deployed", "set_canary", "clear_canary"}
"""Calls that move the policy store's pointers (what a server serves next)."""


def _calls(path: Path, root: Path, names: set[str]) -> list[tuple[str, str]]:
    """Each call ``x.NAME(...)`` in ``path`` for NAME in ``names``: the file (relative to
    ``root``) and the function it is in."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else where
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr in names:
                found.append((path.relative_to(root).as_posix(), where))
            visit(child, inner)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def swaps_outside_the_service(root: Path) -> list[tuple[str, str]]:
    """The router's calls that swap a policy or move the pointer, but the Tab service's."""
    return [c for path in sorted((root / "router").rglob("*.py"))
            for c in _calls(path, root, SWAPS | POINTER) if c[0] != "router/service/tab.py"]


def test_only_the_tab_service_swaps_a_policy_or_moves_the_pointer() -> None:
    outside = swaps_outside_the_service(REPO)
    assert outside == [], f"call the Tab service (router/service/tab.py) instead: {outside}"
    # the loop (a client of the server) swaps nothing: it seeds the store's first version
    # before its server starts, and deploys through the server's API
    loop = [c for path in sorted((REPO / "specialists" / "tab" / "loop").rglob("*.py"))
            for c in _calls(path, REPO, SWAPS | POINTER)]
    assert loop == [("specialists/tab/loop/runner.py", "_bootstrap")]


def test_the_check_sees_a_swap_or_a_pointer_move_outside_the_service(tmp_path: Path) -> None:
    (tmp_path / "router" / "service").mkdir(parents=True)
    (tmp_path / "router" / "service" / "tab.py").write_text("def deploy(s, p):\n    s.swap(p)\n")
    assert swaps_outside_the_service(tmp_path) == []
    (tmp_path / "router" / "app.py").write_text(
        "class App:\n    async def follow(self, spec, policy, store):\n"
        "        spec.swap(policy)\n        store.set_deployed(3)\n")
    assert swaps_outside_the_service(tmp_path) == [("router/app.py", "follow")] * 2
