"""Issue 41 F4 over HTTP (the real server, the fake frontier as a hostile model): a
config's verification command runs model-written code, so it runs in a sandbox that cannot
write outside its scratch copy or reach the network, or not at all.

With bubblewrap usable here each attack of ``router/audit/f4_verify_sandbox.py``
must be contained (the command ran sandboxed and the payload was blocked); without it,
verification must fail closed (no model asked, nothing run). Either way: no sentinel, no
connection to the loopback listener, no canary key in the response, nothing changed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from router.audit import f4_verify_sandbox as f4
from router.audit.common import changed, serve, snapshot
from router.config import parse_config
from router.errors import ConfigError
from tests.fakes.fake_frontier import FakeFrontier

SANDBOXED = f4.sandbox_usable()
ATTACKS = list(f4.payloads({"sentinels": Path("/s"), "repo": Path("/r"),
                            "var_tmp": Path("/v")}, 1))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("f4")
    paths = f4.prepare(tmp)
    listener = f4.Listener()
    fake = FakeFrontier().start()
    try:
        with f4.canary() as secret, serve(f4.config(fake.url, paths, f4.verify_config())) as base:
            yield {"base": base, "fake": fake, "paths": paths, "tmp": tmp, "secret": secret,
                   "listener": listener}
    finally:
        fake.stop()
        listener.close()
        if paths["var_tmp"].exists():
            paths["var_tmp"].unlink()


def _state(tmp: Path) -> dict[str, str]:
    return {p: h for p, h in snapshot(tmp).items() if not p.startswith("data/")}


@pytest.mark.parametrize("name", ATTACKS)
def test_model_written_code_is_contained_or_never_runs(server: dict[str, Any],
                                                       name: str) -> None:
    paths, fake = server["paths"], server["fake"]
    body = f4.payloads(paths, server["listener"].port)[name]
    before = _state(server["tmp"])
    asked = len(fake.requests)
    r = f4.attack(server["base"], fake, paths, body)
    fake.script.clear()
    assert r.status_code == 200, r.text
    result = r.json()
    if SANDBOXED:
        verify = [s for s in result["trace"] if s["stage"] == "verify"][-1]
        command = verify["detail"]["commands"][0]
        assert command["sandbox"] == "bwrap"
        if name == "hang past the time limit":
            assert "timed out after 3s" in verify["reason"], verify
        else:
            assert "F4-BLOCKED" in command["output"], command["output"]
    else:
        assert result["status"] == "failed" and "bubblewrap" in result["reason"], result
        assert len(fake.requests) == asked, "no model is asked when nothing can verify"
    assert server["secret"] not in r.text, "the server's environment reached the command"
    assert list(paths["sentinels"].iterdir()) == [], "no sentinel written outside the copy"
    assert not paths["var_tmp"].exists(), "the file system outside the copy is read-only"
    assert server["listener"].connections == 0, "no connection reached the host"
    assert changed(before, _state(server["tmp"])) == [], "nothing changed"


def test_without_bubblewrap_verification_fails_closed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Wherever bwrap is installed or not: with it off PATH, no command runs, no model is
    asked, and the edit fails saying what to install and how to opt out."""
    paths = f4.prepare(tmp_path)
    sentinel = paths["sentinels"] / "ran"
    verify = {"routes": {"edit": [[sys.executable, "-c", f"open({str(sentinel)!r}, 'w')"]]}}
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    fake = FakeFrontier().start()
    try:
        with serve(f4.config(fake.url, paths, verify)) as base:
            r = f4.attack(base, fake, paths, "pass")
    finally:
        fake.stop()
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["status"] == "failed" and result["files"] == {}
    reason = result["reason"]
    assert "bwrap is not on PATH" in reason and "apt-get install bubblewrap" in reason
    assert "workspace.verify.sandbox: none" in reason and "dangerous" in reason
    assert (result["trace"][-1]["stage"], result["trace"][-1]["outcome"]) == ("verify", "failed")
    assert not any(s["stage"] == "frontier" for s in result["trace"])
    assert fake.requests == [], "no model was asked"
    assert not sentinel.exists(), "the command did not run"


def test_sandbox_none_is_an_explicit_opt_out(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``sandbox: none`` runs the command without bwrap (documented as dangerous); the
    environment is still cleaned."""
    paths = f4.prepare(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap
    monkeypatch.setenv(f4.CANARY_VAR, "sk-canary-opt-out")
    check = f"import os; print('ran', os.environ.get({f4.CANARY_VAR!r}))"
    verify = {"sandbox": "none", "routes": {"edit": [[sys.executable, "-c", check]]}}
    fake = FakeFrontier().start()
    try:
        with serve(f4.config(fake.url, paths, verify)) as base:
            r = f4.attack(base, fake, paths, "pass")
    finally:
        fake.stop()
    assert r.status_code == 200 and r.json()["status"] == "applied", r.text
    command = next(s for s in r.json()["trace"] if s["stage"] == "verify")["detail"]["commands"][0]
    assert command["sandbox"] == "none" and command["output"].strip() == "ran None"


def test_an_unknown_sandbox_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"workspace\.verify\.sandbox.*'bwrap' or 'none'"):
        parse_config({"workspace": {"verify": {"sandbox": "docker"}}}, env={})


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f4.probe(tmp_path)
    assert tally.ok and tally.attempts >= 10, tally.as_dict()


def test_a_program_installed_under_tmp_is_put_back_read_only(tmp_path: Path) -> None:
    """The sandbox empties /tmp; a virtual environment made there (a CI clone under /tmp)
    lost its bin/python inside and every verification failed with 'execvp: No such file'.
    Its install folder goes back read-only, and nothing else of /tmp."""
    from router.edit.sandbox import wrap

    def binds(argv: list[str]) -> list[str]:
        out = wrap(argv, tmp_path, sandbox="bwrap")
        return [out[i + 1] for i, a in enumerate(out) if a == "--ro-bind"]

    assert "/tmp/ci/main/.venv" in binds(["/tmp/ci/main/.venv/bin/python", "-m", "pytest"])
    assert all(b in ("/", "/dev/null") for b in binds(["/usr/bin/python3", "-c", "0"]))
    assert not any(b == "/tmp" for b in binds(["/tmp/python", "-c", "0"]))
