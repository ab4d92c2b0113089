"""Raw HTTP/1.1 over a loopback socket, for the probes that need bytes a client library
would not send (a browser's cross-site form, a foreign ``Host``, half a request line)."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Answer", "exchange", "open_fds", "port_of", "request", "wait_closed"]


def port_of(url: str) -> int:
    return int(urlsplit(url).port or 80)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error_message(self) -> str:
        data = self.json()
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            return str(data["error"].get("message", ""))
        return ""


def request(method: str, path: str, *, host: str = "127.0.0.1", body: bytes | None = None,
            headers: dict[str, str] | None = None) -> bytes:
    """A whole request with ``Connection: close``; ``host=""`` sends no Host header."""
    lines = [f"{method} {path} HTTP/1.1"]
    if host:
        lines.append(f"Host: {host}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def exchange(port: int, data: bytes, timeout: float = 30.0) -> Answer:
    """Send ``data``, read the answer until the server closes; status 0 if none came."""
    started = time.monotonic()
    chunks: list[bytes] = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        deadline = started + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return Answer(0, {}, raw, time.monotonic() - started)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(status, headers, body, time.monotonic() - started)


def open_fds() -> int:
    """File descriptors this process holds (the in-process server's among them)."""
    return len(os.listdir("/proc/self/fd"))


def wait_closed(sock: socket.socket, within: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``within`` seconds, and what it sent."""
    deadline = time.monotonic() + within
    got = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, min(0.5, deadline - time.monotonic())))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:  # reset: closed too
            return True, got
        if not chunk:
            return True, got
        got += chunk
    return False, got
