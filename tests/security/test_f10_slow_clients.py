"""F10 (issue 41): slow clients. A connection whose request headers are not complete
within ``server.header_timeout_s`` is closed (uvicorn has no such limit: ``router.serving``
adds it), and a body must arrive whole within ``server.body_deadline_s`` however it
trickles. The real server in this process (its descriptors are this process's)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Iterator

import pytest

from router.audit import f10_slow_clients as f10
from router.audit.common import Tally
from router.audit.raw import open_fds, port_of, wait_closed

DEADLINE = f10.HEADER_TIMEOUT_S + f10.SLACK_S


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with f10.target(tmp_path_factory.mktemp("f10")) as url:
        yield port_of(url)


def test_half_a_request_line_is_answered_408_and_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/ap")
        started = time.monotonic()
        closed, got = wait_closed(sock, DEADLINE)
    assert closed, "the connection was held past the header deadline"
    assert time.monotonic() - started < DEADLINE
    assert got.startswith(b"HTTP/1.1 408") and b"server.header_timeout_s" in got, got[:200]


def test_a_silent_connection_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        closed, got = wait_closed(sock, DEADLINE)
    assert closed and got == b""


def test_a_keep_alive_connection_pausing_in_its_next_headers_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 12")  # and nothing more
        closed, got = wait_closed(sock, DEADLINE)
    assert closed and b"HTTP/1.1 408" in got, got[:200]  # after any of /healthz's answer


def test_a_slow_request_is_not_cut_once_its_headers_are_in(port: int) -> None:
    """The deadline is for headers: a request whose body arrives in time is answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = b'{"original": "a = 1\\n", "sketch": "a = 2\\n"}'
        sock.sendall(b"POST /v1/apply HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\n\r\n" + body[:5])
        time.sleep(f10.HEADER_TIMEOUT_S + 0.3)  # past the header deadline, within the body's
        sock.sendall(body[5:])
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_two_hundred_slow_header_connections_are_released(port: int) -> None:
    tally = Tally("slow headers")
    baseline = open_fds()
    f10.slow_headers(port, 200, 0, tally)
    assert not tally.failures, tally.failures
    assert open_fds() <= baseline + 5


def test_a_trickled_body_is_cut_at_the_whole_body_deadline(port: int) -> None:
    tally = Tally("trickle")
    took = f10.trickle(port, tally)
    assert not tally.failures, tally.failures
    assert took >= f10.BODY_DEADLINE_S - 0.1  # not the per-receive timeout, which never fired


def test_serve_uses_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """`complement serve` (one worker and --workers N) runs uvicorn with router.serving's
    options: the header-deadline protocol among them."""
    import uvicorn

    from router.cli import main
    from router.serving import HeaderDeadlineH11, HeaderDeadlineHttpTools

    seen: list[dict] = []
    monkeypatch.delenv("COMPLEMENT_CONFIG", raising=False)  # --workers sets it
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.append(kw))
    for argv in (["serve"], ["serve", "--workers", "2"]):
        assert main([*argv, "--config", str(Path(__file__).resolve().parents[2] / "configs"
                                              / "default.yaml"), "--port", "0"]) == 0
    assert len(seen) == 2
    for kw in seen:
        protocol = kw["http"]
        assert protocol.func in (HeaderDeadlineH11, HeaderDeadlineHttpTools)
        assert protocol.keywords["header_timeout_s"] == 10.0
        assert kw["timeout_keep_alive"] > 0


def test_old_configs_load_and_new_keys_have_defaults() -> None:
    from router.config import parse_config

    server = parse_config({"server": {"body_timeout_s": 5}}, env={}).server
    assert (server.body_timeout_s, server.body_deadline_s, server.header_timeout_s) == (5, 60, 10)


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f10.probe(tmp_path)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 250
