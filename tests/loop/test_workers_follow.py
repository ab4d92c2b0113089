"""Several server processes on one data directory (``complement serve --workers N``): a hot
swap reaches the one worker that took the deploy; every other follows the policy store's
deployed pointer and switches within a second — rollbacks too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from router.app import create_app
from router.config import parse_config
from tests.conftest import running

BODY = {"file": "def area(w, h):\n    return w * h\n\ndef volume(w, h, d):\n    return w",
        "cursor": 66, "language": "python"}


def _config(checkpoint: Path, data: Path) -> Any:
    return parse_config({
        "data_dir": str(data),
        "models": {}, "routes": {},
        "specialists": {"tab": {"class": "specialists.tab:TabSpecialist",
                                "options": {"checkpoint": str(checkpoint), "context_tokens": 48}}},
    }, env={})


def _served(url: str) -> int:
    r = httpx.post(f"{url}/v1/tab", json=BODY, timeout=60)
    assert r.status_code == 200, r.text
    return int(r.json()["policy_version"])


def _publish_next(checkpoint: Path, tmp_path: Path, data: Path, first: int) -> None:
    """The loop's next version in the data directory's policy store: the same head, one
    version on."""
    from specialists.tab.loop.versions import PolicyStore, publish_policy
    from specialists.tab.policy import TabPolicy

    newer = TabPolicy.load(checkpoint)
    newer.version = first + 1
    newer.save(tmp_path / "next")
    publish_policy(PolicyStore(data / "tab"), tmp_path / "next", first + 1,
                   {"parent": first, "source": "test", "events_used": 0})


def _wait_for(url: str, version: int, seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while (served := _served(url)) != version and time.monotonic() < deadline:
        time.sleep(0.1)
    return served


def test_a_deploy_to_one_worker_reaches_the_others(tiny_checkpoint: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(create_app(_config(tiny_checkpoint, data), follow_tab_policy_s=0.2)) as one, \
            running(create_app(_config(tiny_checkpoint, data), follow_tab_policy_s=0.2)) as two:
        first = _served(one)
        assert _served(two) == first
        _publish_next(tiny_checkpoint, tmp_path, data, first)

        r = httpx.post(f"{one}/v1/tab/deploy", json={"version": first + 1}, timeout=60)
        assert r.status_code == 200, r.text
        assert _served(one) == first + 1
        assert _wait_for(two, first + 1) == first + 1, "the other worker never switched"

        back = httpx.post(f"{two}/v1/tab/deploy", json={"version": first, "event": "rollback"},
                          timeout=60)
        assert back.status_code == 200, back.text
        assert _wait_for(one, first) == first, "a rollback through the other worker is followed"


def test_without_following_a_worker_keeps_its_version(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """The single-process default does not poll (one process takes every deploy); two
    such apps on one data directory show why the workers must follow the pointer."""
    data = tmp_path / "data"
    with running(create_app(_config(tiny_checkpoint, data))) as one, \
            running(create_app(_config(tiny_checkpoint, data))) as two:
        first = _served(one)
        _publish_next(tiny_checkpoint, tmp_path, data, first)
        assert httpx.post(f"{one}/v1/tab/deploy", json={"version": first + 1},
                          timeout=60).status_code == 200
        time.sleep(1.0)
        assert _served(two) == first


def test_workers_follow_a_canary_and_assign_each_session_alike(tiny_checkpoint: Path,
                                                               tmp_path: Path) -> None:
    """A canary started through one worker is served by the other too, and both put each
    editor session on the same version; an abort through the other ends it on both."""
    data = tmp_path / "data"
    sessions = [f"editor-{i}" for i in range(24)]

    def versions(url: str) -> list[int]:
        return [int(httpx.post(f"{url}/v1/tab", json={**BODY, "session": s},
                               timeout=60).json()["policy_version"]) for s in sessions]

    with running(create_app(_config(tiny_checkpoint, data), follow_tab_policy_s=0.2)) as one, \
            running(create_app(_config(tiny_checkpoint, data), follow_tab_policy_s=0.2)) as two:
        first = _served(one)
        _publish_next(tiny_checkpoint, tmp_path, data, first)
        r = httpx.post(f"{one}/v1/tab/canary", json={"version": first + 1, "share": 0.5},
                       timeout=60)
        assert r.status_code == 200, r.text
        on_one = versions(one)
        assert set(on_one) == {first, first + 1}
        deadline = time.monotonic() + 10
        while (on_two := versions(two)) != on_one and time.monotonic() < deadline:
            time.sleep(0.2)
        assert on_two == on_one, "the other worker did not follow the canary, or split otherwise"

        assert httpx.post(f"{two}/v1/tab/canary/abort", timeout=60,
                          headers={"content-type": "application/json"}).status_code == 200
        deadline = time.monotonic() + 10
        while set(versions(one)) != {first} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert set(versions(one)) == {first}, "an abort through the other worker is followed"
