"""Issue 41's last bullet: /readyz without a key says only its status (no absolute paths,
no worker figures); a 405 carries Allow; a Ray cluster runs no dashboard and keeps a local
cluster's ports on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from router.audit import f11_disclosure as f11
from router.audit.raw import exchange, port_of, request


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with f11.target(tmp_path_factory.mktemp("f11")) as url:
        yield port_of(url)


def test_readyz_without_a_key_says_only_its_status(port: int) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = exchange(port, request("GET", "/readyz", headers=headers))
        assert answer.status == 200
        assert answer.json() == {"status": "ready"}
        assert f11.absolute_paths(answer.body.decode()) == []


def test_readyz_with_the_key_shows_every_specialist(port: int) -> None:
    answer = exchange(port, request("GET", "/readyz",
                                    headers={"Authorization": f"Bearer {f11.KEY}"}))
    data = answer.json()
    assert answer.status == 200 and data["status"] == "ready"
    assert set(data["specialists"]) == {"apply", "retrieval"}
    assert data["specialists"]["retrieval"]["ok"] is True


def test_readyz_on_a_server_without_keys_shows_the_detail(tmp_path: Path) -> None:
    """Loopback only, its Host checked: the detail is the operator's own."""
    with f11.target(tmp_path, keys=[]) as url:
        answer = exchange(port_of(url), request("GET", "/readyz"))
    assert "retrieval" in answer.json()["specialists"]


@pytest.mark.parametrize(("method", "path", "allowed"), f11.NOT_ALLOWED)
def test_a_405_carries_allow(port: int, method: str, path: str, allowed: set[str]) -> None:
    answer = exchange(port, request(
        method, path, body=b"{}" if method != "GET" else None,
        headers={"Authorization": f"Bearer {f11.KEY}", "Content-Type": "application/json"}))
    assert answer.status == 405, answer.body
    assert allowed <= {m.strip() for m in answer.headers.get("allow", "").split(",")}
    assert answer.json()["error"]["message"]


def test_ray_runs_no_dashboard_and_a_local_cluster_listens_on_loopback() -> None:
    from router.config import RayConfig

    local = RayConfig().init_options(local=True)
    assert local["include_dashboard"] is False
    assert local["dashboard_host"] == "127.0.0.1" and local["_node_ip_address"] == "127.0.0.1"
    attached = RayConfig().init_options(local=False)  # an existing cluster keeps its addresses
    assert attached == {"include_dashboard": False}
    # without this Ray swaps 127.0.0.1 for the machine's reachable address
    assert RayConfig.local_environment() == {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def test_the_ray_engine_passes_them_to_ray_init() -> None:
    """router.ray_serve gives ray.init what init_options says (read from its source: Ray
    may not be installed; tests/router/test_ray_engine.py runs a cluster where it is)."""
    root = Path(__file__).resolve().parents[2] / "router"
    source = (root / "ray_serve.py").read_text()
    assert source.count("init_options(local=") == 2
    assert "include_dashboard=True" not in source
    assert "local_environment()" in source
    assert "local_environment()" in (root / "cli.py").read_text()


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f11.probe(tmp_path)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 10
