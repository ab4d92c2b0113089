from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from router.cli import main
from router.config import load_config, parse_config
from router.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_env_interpolation_with_defaults_and_refs() -> None:
    data = {"data_dir": "${HOME_X:-/tmp/x}/data", "models": {
        "m": {"model": "openai/gpt-5", "api_key": "${KEY_A}", "api_base": "$${literal}"}}}
    config = parse_config(data, env={"KEY_A": "sk-123"})
    assert config.data_dir == "/tmp/x/data"
    assert config.models["m"].api_key == "sk-123"
    assert config.models["m"].api_base == "${literal}"
    assert config.env_refs["models.m.api_key"] == ["KEY_A"]


def test_missing_variable_names_key_path_and_variable() -> None:
    with pytest.raises(ConfigError, match=r"models\.m\.api_key: environment variable NOPE_KEY"):
        parse_config({"models": {"m": {"model": "x", "api_key": "${NOPE_KEY}"}}}, env={})


@pytest.mark.parametrize("data, needle", [
    ({"server": {"port": "eighty"}}, "server.port"),
    ({"server": {"port": 99999}}, "server.port"),
    ({"serverr": {}}, "serverr"),
    ({"routes": {"r": {"targets": ["ghost"]}}}, "routes.r.targets.0: 'ghost'"),
    ({"routes": {"r": {"targets": []}}}, "routes.r.targets"),
    ({"models": {"m": {"model": "x"}}, "routes": {"r": {"policy": "random", "targets": ["m"]}}},
     "routes.r.policy"),
    ({"models": {"m": {"model": "x"}}, "routes": {"r": {"targets": ["m"],
                                                       "verify": [{"kind": "regex"}]}}},
     "regex verifier needs 'pattern'"),
    ({"server": {"host": "0.0.0.0"}}, "server.api_keys is empty"),
    ({"specialists": {"s": {"klass": "x:Y"}}}, "specialists.s"),
])
def test_invalid_config_names_the_key_path(data: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, env={})
    assert needle in str(info.value)


def test_offending_value_is_shown() -> None:
    with pytest.raises(ConfigError, match="got 'eighty'"):
        parse_config({"server": {"port": "eighty"}}, env={})


def test_shipped_configs_validate() -> None:
    files = sorted((REPO / "configs").glob("*.yaml"))
    assert any(f.name == "default.yaml" for f in files)
    keys = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}
    for path in files:
        config = load_config(path, env=keys)
        assert config.routes, path
    # the default runs with no key at all
    assert load_config(REPO / "configs" / "default.yaml", env={}).routes


def test_config_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(REPO / "configs" / "default.yaml")]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  r:\n    targets: [nobody]\n")
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "routes.r.targets.0" in err and "'nobody'" in err
    assert main(["config", "check", str(tmp_path / "missing.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    notyaml = tmp_path / "broken.yaml"
    notyaml.write_text("routes: [unclosed\n")
    assert main(["config", "check", str(notyaml)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_bad_specialist_class_fails_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("specialists:\n  s: {class: 'tests.router.swap_specialists:Nope'}\n")
    assert main(["config", "check", str(path)]) == 2
    assert "specialists.s.class" in capsys.readouterr().err


def test_serve_with_invalid_config_exits_nonzero(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server: {port: -1}\n")
    proc = subprocess.run([sys.executable, "-m", "router.cli", "serve", "--config", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "server.port" in proc.stderr


def test_an_unknown_key_names_the_nearest_known_one_and_lists_them() -> None:
    """Issue 40: a top-level typo listed no known keys."""
    from router.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as info:
        parse_config({"servr": {"port": 1}, "models": {"m": {"model": "x", "api_bse": "y"}}},
                     env={})
    text = str(info.value)
    assert "servr: unknown key; did you mean 'server'?" in text
    assert "known here: data_dir, endpoints, engine, events" in text and "env_refs" not in text
    assert "models.m.api_bse: unknown key; did you mean 'api_base'?" in text


def test_config_check_on_a_missing_file_says_to_give_a_path(tmp_path, capsys) -> None:
    from router.cli import main

    assert main(["config", "check", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert "not found; give the path of a YAML config" in err and "--config" not in err
