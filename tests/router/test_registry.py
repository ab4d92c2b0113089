"""Swapping a specialist is a YAML edit: two files, two classes, two behaviours."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from router.app import create_app
from router.config import load_config
from router.errors import ConfigError
from router.registry import Registry, load_class
from tests.conftest import running
from tests.router.swap_specialists import Shouter

CONFIG = """
data_dir: {data_dir}
routes:
  local:
    targets: [talker]
specialists:
  talker:
    class: "{cls}"
    options: {opts}
"""


def _ask(base: str, text: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", timeout=30,
                      json={"model": "local", "messages": [{"role": "user", "content": text}]})


def test_swap_specialist_by_config_alone(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text(CONFIG.format(cls="tests.router.swap_specialists:Shouter",
                               opts="{suffix: '?!'}", data_dir=tmp_path))
    b = tmp_path / "b.yaml"
    b.write_text(CONFIG.format(cls="tests.router.swap_specialists:Reverser", opts="{}",
                             data_dir=tmp_path))
    answers = {}
    for path in (a, b):
        with running(create_app(load_config(path, env={}))) as base:
            r = _ask(base, "hello")
            assert r.status_code == 200, r.text
            answers[path.name] = r.json()["choices"][0]["message"]["content"]
            assert r.headers["x-complement-model"] == "talker"
    assert answers == {"a.yaml": "HELLO?!", "b.yaml": "olleh"}


def test_unknown_option_names_the_block() -> None:
    from router.config import parse_config

    config = parse_config({"specialists": {"t": {"class": "tests.router.swap_specialists:Shouter",
                                                 "options": {"sufix": "!"}}}}, env={})
    with pytest.raises(ConfigError, match=r"specialists\.t\.options.*sufix"):
        Registry.from_config(config.specialists)


def test_entry_point_name_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = SimpleNamespace(name="shouter", load=lambda: Shouter)
    monkeypatch.setattr("router.registry.entry_points",
                        lambda group: [ep] if group == "complement.specialists" else [])
    assert load_class("shouter") is Shouter
    with pytest.raises(ConfigError, match="neither 'package.module:Class' nor an entry point"):
        load_class("nobody")


def test_not_a_specialist_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a subclass"):
        load_class("pathlib:Path")


def test_broken_specialist_is_not_ready_but_server_serves(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(cls="tests.router.swap_specialists:Broken", opts="{}",
                                data_dir=tmp_path))
    with running(create_app(load_config(path, env={}))) as base:
        assert httpx.get(f"{base}/healthz").status_code == 200
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 503
        assert "weights file is corrupt" in ready.json()["specialists"]["talker"]["error"]
        r = _ask(base, "hi")
        assert r.status_code == 503
        assert "talker" in r.json()["error"]["message"]


@pytest.mark.parametrize("block", [
    {"class": "specialists.tab:TabSpecialist", "options": {"chekpoint": "x"}},
    {"class": "specialists.apply.specialist:ApplySpecialist", "options": {"max_delete": 0.5}},
    {"class": "retrieval.specialist:RetrievalSpecialist", "options": {"chunk_sise": 10}},
])
def test_shipped_specialists_refuse_unknown_options(block: dict) -> None:
    """A misspelt option fails at load with its key path instead of silently doing nothing."""
    from router.config import parse_config

    config = parse_config({"specialists": {"s": block}}, env={})
    with pytest.raises(ConfigError, match=r"specialists\.s\.options\.\w+: unknown option"):
        Registry.from_config(config.specialists)


def test_shipped_specialists_are_entry_points() -> None:
    """`class: tab` in YAML works as well as the import string (installed entry points)."""
    from specialists.tab import TabSpecialist

    assert load_class("tab") is TabSpecialist
    assert load_class("apply").kind == "apply"
    assert load_class("retrieval").kind == "retrieval"
