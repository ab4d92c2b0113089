"""F2 (issue 41): an empty or wildcard host is not loopback; a server without keys refuses
to bind it, from the command line and from the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from router.audit import f2_empty_host as f2
from router.audit.common import Tally, free_port
from router.config import ConfigError, is_loopback, load_config, parse_config


@pytest.mark.parametrize("host", ["", " ", "0.0.0.0", "::", "[::]", "*", "localhost.evil",
                                  "10.0.0.1", " localhost"])
def test_only_loopback_hosts_count_as_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


def test_an_empty_host_is_refused_even_with_keys() -> None:
    with pytest.raises(ConfigError, match="server.host is empty, which binds every interface"):
        parse_config({"server": {"host": "", "api_keys": ["k"]}}, env={})
    with pytest.raises(ConfigError, match="needs an API key"):
        parse_config({"server": {"host": "0.0.0.0"}}, env={})
    assert parse_config({"server": {"host": "0.0.0.0", "api_keys": ["k"]}},
                        env={}).server.host == "0.0.0.0"


def test_a_variable_set_empty_takes_its_default_as_in_the_shell(tmp_path: Path) -> None:
    """COMPLEMENT_HOST= (set, empty) bound every interface; ${VAR:-x} now gives x, and
    ${VAR} (no default) still gives the empty value."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"server": {"host": "${COMPLEMENT_HOST:-127.0.0.1}"},
                                      "data_dir": "${D}"}))
    cfg = load_config(config, env={"COMPLEMENT_HOST": "", "D": ""})
    assert cfg.server.host == "127.0.0.1"
    assert cfg.data_dir == ""


def test_the_default_config_with_complement_host_empty_binds_loopback() -> None:
    assert load_config(None, env={"COMPLEMENT_HOST": ""}).server.host == "127.0.0.1"


def test_serve_with_an_empty_host_exits_and_says_why(tmp_path: Path) -> None:
    """The reproduction: ``complement serve --host ''`` listened on 0.0.0.0 and [::] and
    answered without a key."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "d"), "specialists": {}}))
    tally = Tally("t")
    f2.start_refused(config, ["--host", ""], f2._env(), free_port(), tally, "--host ''")
    assert tally.attempts == 1
    assert tally.failures == []


def test_probe_counts_no_keyless_server(tmp_path: Path) -> None:
    tally = f2.probe(tmp_path)
    assert tally.attempts >= 10
    assert tally.ok, tally.as_dict()
