"""The ``engine`` config section, ``serve --engine ray``'s refusals and a Tab deploy's report; no cluster needed."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from router.cli import main
from router.config import parse_config
from router.errors import ConfigError

SPECIALISTS = {"tab": {"class": "specialists.tab:TabSpecialist"},
               "apply": {"class": "specialists.apply.specialist:ApplySpecialist"},
               "off": {"class": "specialists.apply.specialist:ApplySpecialist",
                       "enabled": False}}


def _config(ray: dict[str, Any], **engine: Any) -> Any:
    return parse_config({"specialists": SPECIALISTS, "engine": {"ray": ray, **engine}}, env={})


def test_a_full_section_parses() -> None:
    config = _config({"address": "head:6379", "object_store_mb": 300,
                      "ingress": {"num_replicas": 1, "max_ongoing_requests": 128},
                      "deployments": {
                          "tab": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4,
                                                         "target_ongoing_requests": 4},
                                  "ray_actor_options": {"num_cpus": 2, "memory": 2 ** 30}},
                          "apply": {"num_replicas": 2}}}, kind="ray")
    ray = config.engine.ray
    assert config.engine.kind == "ray" and ray.address == "head:6379"
    assert ray.deployments["tab"].autoscaling_config.max_replicas == 4
    assert ray.deployments["tab"].ray_actor_options.options() == {"num_cpus": 2.0,
                                                                  "memory": 2 ** 30}
    assert ray.deployments["apply"].num_replicas == 2
    assert parse_config({}, env={}).engine.kind == "single"


@pytest.mark.parametrize("ray, needle", [
    ({"deployments": {"tabb": {"num_replicas": 2}}},
     "engine.ray.deployments.tabb: no enabled specialist 'tabb'"),
    ({"deployments": {"off": {}}}, "no enabled specialist 'off'"),
    ({"deployments": {"tab": {"replicas": 2}}}, "engine.ray.deployments.tab.replicas"),
    ({"deployments": {"tab": {"num_replicas": 0}}}, "engine.ray.deployments.tab.num_replicas"),
    ({"deployments": {"tab": {"num_replicas": 2, "autoscaling_config": {"max_replicas": 3}}}},
     "num_replicas or autoscaling_config, not both"),
    ({"deployments": {"tab": {"autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}}},
     "min_replicas (3) is above max_replicas (2)"),
    ({"deployments": {"tab": {"ray_actor_options": {"num_cpu": 1}}}},
     "ray_actor_options.num_cpu: unknown key; did you mean 'num_cpus'?"),
    ({"adress": "x:6379"}, "engine.ray.adress"),
    ({"app_name": "a b"}, "engine.ray.app_name"),
])
def test_bad_section_names_the_key(ray: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(ray)
    assert needle in str(info.value)


def test_unknown_engine_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="engine.kind"):
        _config({}, kind="k8s")


def _write(tmp_path: Any) -> str:
    path = tmp_path / "c.yaml"
    path.write_text("specialists:\n"
                    "  apply: {class: 'specialists.apply.specialist:ApplySpecialist'}\n")
    return str(path)


def test_serve_ray_without_the_extra_says_how_to_install(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "router.ray_serve", raising=False)
    assert main(["serve", "--engine", "ray", "--config", _write(tmp_path)]) == 2
    assert "pip install -e '.[ray]'" in capsys.readouterr().err


def test_serve_ray_refuses_workers(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--engine", "ray", "--workers", "2", "--config",
                 _write(tmp_path)]) == 2
    assert "engine.ray.deployments" in capsys.readouterr().err


def test_first_ray_deploy_reports_the_version_served_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The board's first publish has no previous version: the deploy reports what the
    replicas served, read before the publish, even when the health poll sees the new
    version while they switch (it did, and the deploy said previous == new)."""
    ray_serve = pytest.importorskip("router.ray_serve")
    from specialists.tab import TabSpecialist

    class Call:
        def __init__(self, fn: Any) -> None:
            self.remote = fn

    tab = ray_serve.RemoteTab("tab", TabSpecialist, handle=None, app_name="t")
    tab._health, tab._version = {"ok": True, "version": "160"}, "160"  # the last health poll

    class Board:
        def __init__(self) -> None:
            self.publish = Call(lambda version, state: (1, None, None))
            self.status = Call(self._status)

        def _status(self, seq: int) -> dict[str, Any]:
            tab._health, tab._version = {"ok": True, "version": "167"}, "167"  # a poll meanwhile
            return {"alive": ["r1"], "switched": {"r1": {"replica": "r1", "version": 167,
                                                          "switched_at": 1.0, "error": None}}}

    board = Board()
    monkeypatch.setattr(ray_serve, "_board", lambda app_name: board)
    monkeypatch.setattr(ray_serve.ray, "get", lambda value, **_: value)

    class Policy:
        version = 167

        def state(self) -> dict[str, Any]:
            return {}

    assert tab.swap(Policy()) == 160
    assert tab.version == "167"
