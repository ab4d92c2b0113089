"""F10: slow clients hold connections (and file descriptors) without limit.

Reproduced by hand: the body timeout was per receive, so a body trickling a byte a second
never timed out; a connection whose request headers never completed was never closed
(1,500 held for 20 s took the process from 29 to 1,529 file descriptors). Here the real
server (uvicorn with ``router.serving``'s options, in this process, so its descriptors are
this process's) runs with deadlines of a second or two, and:

* ``SLOW_HEADERS`` sockets send half a request line, ``IDLE`` send nothing, and one sends a
  whole request, reads the answer, then half of the next: each must be closed by the server
  within ``server.header_timeout_s`` (plus slack), and the process's descriptors must come
  back down while the attacker still holds its ends;
* a body that trickles a byte every half second (never stalling for
  ``server.body_timeout_s``) must be cut with a 408 at ``server.body_deadline_s``.
"""

from __future__ import annotations

import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from router.audit.common import Tally, serve
from router.audit.raw import open_fds, port_of, wait_closed

__all__ = ["BODY_DEADLINE_S", "HEADER_TIMEOUT_S", "probe", "slow_headers", "target", "trickle"]

HEADER_TIMEOUT_S = 1.0
BODY_DEADLINE_S = 2.0
BODY_TIMEOUT_S = 1.5  # per receive: above the trickle's interval, so only the deadline cuts it
TRICKLE_EVERY_S = 0.5
SLOW_HEADERS = 200
IDLE = 50
#: How long past a deadline the server may take (a loaded 2-core machine).
SLACK_S = 5.0


@contextmanager
def target(tmp: Path) -> Iterator[str]:
    config = {"data_dir": str(tmp / "data"),
              "server": {"header_timeout_s": HEADER_TIMEOUT_S, "body_deadline_s": BODY_DEADLINE_S,
                         "body_timeout_s": BODY_TIMEOUT_S},
              "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}
    with serve(config) as url:
        yield url


def slow_headers(port: int, count: int, idle: int, tally: Tally) -> None:
    """Open ``count`` half-request-line and ``idle`` silent connections plus one that pauses
    mid-way through its second request; each must be closed in time, and the server's
    descriptors released."""
    baseline = open_fds()
    socks: list[socket.socket] = []
    try:
        for i in range(count + idle):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i < count:
                sock.sendall(b"GET /v1/mod")
            socks.append(sock)
        keep_alive = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(keep_alive)
        keep_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = keep_alive.recv(65536)
        tally.expect(first.startswith(b"HTTP/1.1 200"), f"/healthz answered {first[:40]!r}")
        keep_alive.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127")
        opened = time.monotonic()
        held = open_fds()
        tally.attempts += len(socks)
        deadline = opened + HEADER_TIMEOUT_S + SLACK_S
        still_open = 0
        for i, sock in enumerate(socks):
            closed, got = wait_closed(sock, max(0.0, deadline - time.monotonic()))
            if not closed:
                still_open += 1
            elif i < count or sock is keep_alive:  # bytes were sent: a 408 says why
                tally.expect(b"HTTP/1.1 408" in got,  # after the rest of /healthz's answer
                             f"a slow-header connection was closed with {got[:40]!r}")
        tally.expect(still_open == 0, f"{still_open} of {len(socks)} slow-header connections "
                                      f"still open {HEADER_TIMEOUT_S + SLACK_S:g}s after the "
                                      f"{HEADER_TIMEOUT_S:g}s header deadline")
        # the attacker still holds its ends: the server's must be gone. Its event loop closes
        # a socket a turn after the client saw the connection end, so a loaded machine may
        # need a moment: the same slack as the close itself
        released = held - open_fds()
        settle = time.monotonic() + SLACK_S
        while released < len(socks) - 5 and time.monotonic() < settle:
            time.sleep(0.05)
            released = held - open_fds()
        tally.expect(released >= len(socks) - 5,
                     f"the server released {released} of {len(socks)} descriptors "
                     f"({baseline} before, {held} while held)")
    finally:
        for sock in socks:
            sock.close()
    after = open_fds()
    tally.expect(after <= baseline + 5, f"descriptors {baseline} -> {after} after the attack")


def trickle(port: int, tally: Tally) -> float:
    """A body that never stalls, a byte every ``TRICKLE_EVERY_S``; seconds until cut."""
    tally.attempts += 1
    started = time.monotonic()
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/apply HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")
        sock.settimeout(TRICKLE_EVERY_S)
        limit = started + BODY_DEADLINE_S + SLACK_S
        while time.monotonic() < limit:
            try:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
                if b"\r\n\r\n" in got:
                    closed, rest = wait_closed(sock, SLACK_S)
                    got += rest
                    tally.expect(closed, "the connection stayed open after the 408")
                    break
            except socket.timeout:
                try:
                    sock.sendall(b" ")
                except OSError:
                    break
            except OSError:
                break
    took = time.monotonic() - started
    tally.expect(got.startswith(b"HTTP/1.1 408") and b"server.body_deadline_s" in got,
                 f"a trickled body was answered {got[:60]!r} after {took:.1f}s, not a 408 "
                 "naming server.body_deadline_s")
    tally.expect(took < BODY_DEADLINE_S + SLACK_S,
                 f"a trickled body was cut only after {took:.1f}s")
    return took


def probe(tmp: Path) -> Tally:
    tally = Tally("f10_slow_clients")
    with target(tmp) as url:
        port = port_of(url)
        slow_headers(port, SLOW_HEADERS, IDLE, tally)
        trickle(port, tally)
    return tally
