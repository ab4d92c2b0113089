"""Issue 41's last bullet: what the server discloses, and to whom.

* ``/readyz`` needs no key (load balancers ask it) and showed each specialist's health:
  absolute paths (indexes, checkpoints) and worker figures. Without a valid key it must
  say only the status; an absolute path in it counts as a leak.
* A 405 must carry ``Allow`` (RFC 9110), saying which methods the path takes.
* ``--engine ray``: no dashboard, and a local cluster's ports on 127.0.0.1
  (``engine.ray``'s ``init_options``, what ``router.ray_serve`` passes to ``ray.init``, and
  ``local_environment``, set before Ray is imported; ``tests/router/test_ray_engine.py``
  checks what a running cluster listens on, where Ray is installed).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from router.audit.common import Tally, serve
from router.audit.raw import exchange, port_of, request

__all__ = ["KEY", "NOT_ALLOWED", "absolute_paths", "probe", "target"]

KEY = "probe-key-f11"
#: (method, path, the methods its Allow must list)
NOT_ALLOWED = [("GET", "/v1/apply", {"POST"}), ("GET", "/v1/feedback", {"POST"}),
               ("DELETE", "/v1/tab/versions", {"GET"}), ("POST", "/healthz", {"GET"}),
               ("PUT", "/v1/chat/completions", {"POST"}), ("POST", "/v1/models", {"GET"})]
_ABSOLUTE = re.compile(r'"(/[^"\s]*|[A-Za-z]:\\\\[^"]*)"|(?<![\w.:/])/(?:tmp|home|root|work|'
                       r'usr|var|opt|Users)/')


def absolute_paths(text: str) -> list[str]:
    """Absolute file paths quoted (or embedded) in a JSON text."""
    return [m.group(0) for m in _ABSOLUTE.finditer(text)]


@contextmanager
def target(tmp: Path, keys: list[str] | None = None) -> Iterator[str]:
    repos = tmp / "repos"
    (repos / "proj").mkdir(parents=True, exist_ok=True)
    (repos / "proj" / "a.py").write_text("def f():\n    return 1\n")
    config = {"data_dir": str(tmp / "data"),
              "server": {"api_keys": [KEY] if keys is None else keys},
              "specialists": {
                  "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
                  "retrieval": {"class": "retrieval.specialist:RetrievalSpecialist",
                                "options": {"allowed_root": str(repos), "embedder": "hash:64",
                                            "index_dir": str(tmp / "data" / "indexes")}}}}
    with serve(config) as url:
        yield url


def _ray_options(tally: Tally) -> None:
    from router.config import RayConfig

    tally.attempts += 2
    init_options = getattr(RayConfig(), "init_options", None)
    if not tally.expect(init_options is not None, "engine.ray has no init_options: what "
                        "ray.init is given about dashboards and addresses is not checked"):
        return
    local = init_options(local=True)
    tally.expect(local.get("include_dashboard") is False,
                 f"a local Ray cluster runs the dashboard: {local}")
    tally.expect(local.get("dashboard_host") == "127.0.0.1"
                 and local.get("_node_ip_address") == "127.0.0.1",
                 f"a local Ray cluster listens beyond 127.0.0.1: {local}")
    attached = init_options(local=False)
    tally.expect(attached.get("include_dashboard") is False,
                 f"attaching to a cluster starts a dashboard: {attached}")
    # Ray takes a node address of 127.0.0.1 for the reachable one unless clusters are off
    environment = getattr(RayConfig, "local_environment", lambda: {})()
    tally.expect(environment.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0",
                 f"a local Ray cluster's processes listen on every interface: {environment}")


def probe(tmp: Path) -> Tally:
    tally = Tally("f11_disclosure")
    with target(tmp) as url:
        port = port_of(url)
        host = f"127.0.0.1:{port}"
        for auth in ({}, {"Authorization": "Bearer wrong"}):
            tally.attempts += 1
            answer = exchange(port, request("GET", "/readyz", host=host, headers=auth))
            text = answer.body.decode("utf-8", "replace")
            paths = absolute_paths(text)
            tally.leaks += len(paths)
            tally.expect(answer.status in (200, 503) and isinstance(answer.json(), dict)
                         and set(answer.json()) == {"status"},
                         f"/readyz with {auth or 'no key'} showed more than its status: "
                         f"{text[:200]}")
        keyed = exchange(port, request("GET", "/readyz", host=host,
                                       headers={"Authorization": f"Bearer {KEY}"}))
        data = keyed.json() or {}
        tally.expect("specialists" in data and "retrieval" in data["specialists"],
                     f"/readyz with the key lost its detail: {keyed.body[:200]!r}")
        for method, path, allowed in NOT_ALLOWED:
            tally.attempts += 1
            answer = exchange(port, request(
                method, path, host=host, body=b"{}" if method != "GET" else None,
                headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}))
            listed = {m.strip() for m in answer.headers.get("allow", "").split(",") if m.strip()}
            tally.expect(answer.status == 405 and allowed <= listed,
                         f"{method} {path}: {answer.status} with Allow "
                         f"{answer.headers.get('allow')!r}, not a 405 listing {sorted(allowed)}")
    _ray_options(tally)
    return tally
