"""Issue 41 F3 over HTTP (the real server, the fake frontier as a hostile model): a
``/v1/edit`` answer writes only the files the request named. Each attack of
``router/audit/f3_edit_writes.py`` is its own test: a 403 naming the path, no model
asked where the request itself is refused, and nothing changed under the test's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from router.audit import f3_edit_writes as f3
from router.audit.common import changed, serve, snapshot
from tests.fakes.fake_frontier import FakeFrontier

ATTACKS = [a["name"] for a in f3.attacks({"sentinel": Path("/s"), "outside": Path("/o")})]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One server for the module: the repository, the fake frontier, the base URL."""
    tmp = tmp_path_factory.mktemp("f3")
    paths = f3.layout(tmp)
    fake = FakeFrontier().start()
    try:
        with serve(f3.config(fake.url, paths)) as base:
            yield {"base": base, "fake": fake, "paths": paths, "tmp": tmp}
    finally:
        fake.stop()


def _state(tmp: Path) -> dict[str, str]:
    return {p: h for p, h in snapshot(tmp).items() if not p.startswith("data/")}


def _edit(server: dict[str, Any], fmt: str, answer: dict[str, str],
          **request: Any) -> httpx.Response:
    """``/v1/edit`` of app.py with write (``request`` changes it), the model answering
    ``answer`` (path -> text) in format ``fmt``."""
    server["fake"].script.clear()
    server["fake"].push(f3.answer(fmt, answer))
    body = {"instruction": "add a docstring to greet", "route": "edit", "write": True,
            "repo": str(server["paths"]["repo"]), "files": ["app.py"], "strategy": fmt,
            **request}
    return httpx.post(f"{server['base']}/v1/edit", json=body, timeout=60)


@pytest.mark.parametrize("name", ATTACKS)
def test_an_answer_or_request_naming_another_path_is_refused_and_writes_nothing(
        server: dict[str, Any], name: str) -> None:
    attack = next(a for a in f3.attacks(server["paths"]) if a["name"] == name)
    before = _state(server["tmp"])
    asked = len(server["fake"].requests)
    r = _edit(server, attack["fmt"], attack["files"], **attack.get("request", {}))
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["type"] == "permission_error"
    assert error["param"] == attack.get("param", "answer")
    assert attack["path"] in error["message"], error["message"]
    assert changed(before, _state(server["tmp"])) == [], "nothing written anywhere"
    if attack.get("asks_model", True) is False:
        assert len(server["fake"].requests) == asked, "refused before any model is asked"
        assert "write false" in error["message"], "the error says what to do instead"


def test_the_refusal_says_which_files_the_edit_may_change(server: dict[str, Any]) -> None:
    r = _edit(server, "whole_file", {"app.py": f3.APP_NEW, "evil_new.py": "import os\n"})
    assert r.status_code == 403
    message = r.json()["error"]["message"]
    assert "'evil_new.py'" in message and "['app.py']" in message
    assert "nothing was written" in message and "name it in files" in message
    assert (server["paths"]["repo"] / "app.py").read_text() == f3.APP
    assert not (server["paths"]["repo"] / "evil_new.py").exists()


def test_a_new_file_the_request_names_is_written_and_nothing_else(
        server: dict[str, Any]) -> None:
    before = _state(server["tmp"])
    r = _edit(server, "whole_file", {"app.py": f3.APP, "lib/new.py": "x = 1\n"},
              files=["app.py", "lib/new.py"])
    assert r.status_code == 200 and r.json()["status"] == "applied", r.text
    assert sorted(r.json()["written"]) == ["app.py", "lib/new.py"]
    assert changed(before, _state(server["tmp"])) == ["repos/repo/lib/new.py"]
    (server["paths"]["repo"] / "lib" / "new.py").unlink()
    (server["paths"]["repo"] / "lib").rmdir()


def test_git_status_runs_no_planted_command(server: dict[str, Any]) -> None:
    """After an answer planting an fsmonitor in .git/config, git status runs nothing."""
    import shutil
    import subprocess

    attack = next(a for a in f3.attacks(server["paths"])
                  if a["name"] == "whole_file: .git/config with fsmonitor")
    r = _edit(server, "whole_file", attack["files"])
    assert r.status_code == 403
    if shutil.which("git"):
        subprocess.run(["git", "-C", str(server["paths"]["repo"]), "status", "--short"],
                       capture_output=True, timeout=60)
    assert "fsmonitor" not in (server["paths"]["repo"] / ".git" / "config").read_text()
    assert not server["paths"]["sentinel"].exists()


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f3.probe(tmp_path)
    assert tally.ok and tally.attempts >= 24, tally.as_dict()


def test_the_request_names_files_in_their_plain_form(server: dict[str, Any]) -> None:
    """``./app.py`` in files is ``app.py`` to the model, so its answer for it is accepted."""
    before = _state(server["tmp"])
    r = _edit(server, "whole_file", {"app.py": f3.APP}, files=["./app.py"])
    assert r.status_code == 200 and r.json()["written"] == ["app.py"], r.text
    assert changed(before, _state(server["tmp"])) == []  # the same text: nothing changed
    prompt = server["fake"].requests[-1]["messages"][-1]["content"]
    assert "app.py" in prompt and "./app.py" not in prompt
