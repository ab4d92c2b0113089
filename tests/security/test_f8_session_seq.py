"""F8 (issue 41): one request with a huge ``seq`` cannot silence a session, and a session
that counts from 0 again (a reload, a reopened document) is answered after a pause; a
request overtaken in flight is still dropped. The real server over HTTP, the shipped
checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from router.audit import f8_session_seq as f8
from router.audit.common import serve


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with serve(f8.config(tmp_path_factory.mktemp("f8"))) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        yield c


@pytest.mark.parametrize("seq", [10**18, 2**53, -1])
def test_a_seq_out_of_range_is_a_400_naming_it(client: httpx.Client, seq: int) -> None:
    r = f8.tab(client, "s-range", seq)
    assert r.status_code == 400, r.text
    assert "seq" in r.text


def test_the_largest_seq_does_not_silence_the_session_after_a_pause(client: httpx.Client) -> None:
    for seq in range(3):
        f8.tab(client, "s-victim", seq)
    f8.tab(client, "s-victim", 2**53 - 1)  # the attacker's one request
    assert f8.cancelled(f8.tab(client, "s-victim", 3))  # at once: overtaken, dropped
    time.sleep(f8.RESTART_S * 1.5)
    for seq in range(4, 7):
        r = f8.tab(client, "s-victim", seq)
        assert r.status_code == 200 and not f8.cancelled(r), r.text


def test_a_reloaded_editor_counting_from_zero_is_answered(client: httpx.Client) -> None:
    """The bug report: seq 0-9, then 0, 1, 2 (a reload) were all cancelled."""
    for seq in range(10):
        f8.tab(client, "s-reload", seq)
    time.sleep(f8.RESTART_S * 1.5)
    for seq in range(3):
        r = f8.tab(client, "s-reload", seq)
        assert r.status_code == 200 and not f8.cancelled(r), r.text


def test_a_request_overtaken_in_flight_is_still_dropped(client: httpx.Client) -> None:
    assert not f8.cancelled(f8.tab(client, "s-order", 7))
    r = f8.tab(client, "s-order", 6)  # arrives right after a newer one: stale
    assert f8.cancelled(r) and "newer" in r.json()["reason"]


def test_probe_counts_no_silenced_session(tmp_path: Path) -> None:
    tally = f8.probe(tmp_path, rounds=1)
    assert tally.attempts >= 5
    assert tally.ok, tally.as_dict()
