"""The edit API is safe on a network: through a real HTTP server (uvicorn on loopback, the
fake frontier as the provider), a request cannot name a command, a repository outside the
allowed roots or a path out of one, and a model's answer cannot write outside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from router.app import create_app
from router.replay import search_replace_blocks
from specialists.apply import make_sketch
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier
from tests.pipeline.conftest import AFTER, BEFORE, fake_config, fenced


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """repos/repo (the allowed root's repository) and outside/ (a place it must not reach)."""
    roots = tmp_path / "repos"
    repo = roots / "repo"
    repo.mkdir(parents=True)
    (repo / "app.py").write_text(BEFORE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep\n")
    (repo / "link").symlink_to(outside, target_is_directory=True)
    (roots / "escape").symlink_to(outside, target_is_directory=True)
    return {"root": roots, "repo": repo, "outside": outside, "data": tmp_path / "data"}


def _snapshot(*dirs: Path) -> dict[str, str]:
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = p.read_text()
    return out


def _edit(base: str, **body: Any) -> httpx.Response:
    payload = {"instruction": "add a docstring to greet", "route": "edit", **body}
    return httpx.post(f"{base}/v1/edit", json=payload, timeout=60)


def test_a_request_cannot_name_a_command(fake: FakeFrontier, layout: dict[str, Path]) -> None:
    marker = layout["outside"] / "pwned"
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]]))) as base:
        with_command = _edit(base, repo=str(layout["repo"]), files=["app.py"],
                             verify_command=f"touch {marker}")
        unknown = _edit(base, repo=str(layout["repo"]), files=["app.py"], run="ls")
    assert with_command.status_code == 400, with_command.text
    error = with_command.json()["error"]
    assert error["param"] == "verify_command" and "unknown field" in error["message"]
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "run"
    assert not marker.exists() and fake.requests == [], "nothing ran, no model was asked"


@pytest.mark.parametrize("repo", ["outside", "dotdot", "escape", "relative-escape"])
def test_a_repository_outside_the_allowed_roots_is_refused(
        fake: FakeFrontier, layout: dict[str, Path], repo: str) -> None:
    raw = {"outside": str(layout["outside"]),
           "dotdot": str(layout["repo"]) + "/../../outside",
           "escape": str(layout["root"] / "escape"),
           "relative-escape": "escape"}[repo]
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]]))) as base:
        r = _edit(base, repo=raw, files=["app.py"], write=True)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["type"] == "permission_error"
    assert r.json()["error"]["param"] == "repo"
    assert fake.requests == []


def test_no_allowed_roots_means_no_repository(fake: FakeFrontier,
                                              layout: dict[str, Path]) -> None:
    with running(create_app(fake_config(fake, layout["data"], []))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=["app.py"])
    assert r.status_code == 403 and "allowed_roots" in r.json()["error"]["message"]


@pytest.mark.parametrize("path", ["../outside/secret.txt", "/etc/passwd", "link/secret.txt"])
def test_request_files_out_of_the_repository_are_refused(
        fake: FakeFrontier, layout: dict[str, Path], path: str) -> None:
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]]))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=[path])
        inline = _edit(base, texts={path: "x = 1\n"})
    assert r.status_code == 403 and r.json()["error"]["param"] == "files", r.text
    if not path.startswith("link/"):  # inline texts have no tree, so no symlink to follow
        assert inline.status_code == 403 and inline.json()["error"]["param"] == "texts"
        assert fake.requests == []


def test_an_answer_naming_a_system_path_is_refused(fake: FakeFrontier,
                                                    layout: dict[str, Path]) -> None:
    fake.push(fenced("planted = True\n", "/etc/x"))
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]]))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=["app.py"], strategy="whole_file")
    assert r.status_code == 403 and r.json()["error"]["param"] == "answer", r.text
    assert "/etc/x" in r.json()["error"]["message"] and not Path("/etc/x").exists()


@pytest.mark.parametrize("where", ["dotdot", "absolute", "symlink"])
@pytest.mark.parametrize("strategy", ["whole_file", "search_replace", "sketch"])
def test_an_answer_naming_a_path_out_of_the_root_writes_nothing(
        fake: FakeFrontier, layout: dict[str, Path], where: str, strategy: str) -> None:
    target = {"dotdot": "../../outside/planted.py",
              "absolute": str(layout["outside"] / "planted.py"),
              "symlink": "link/planted.py"}[where]
    body = "planted = True\n"
    answer = ("text:" + search_replace_blocks("", body, target) if strategy == "search_replace"
              else fenced(body, target))
    fake.push(answer)
    before = _snapshot(layout["root"], layout["outside"])
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]]))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=["app.py"], strategy=strategy,
                  write=True)
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["param"] == "answer" and "the model's answer names the path" in error["message"]
    assert _snapshot(layout["root"], layout["outside"]) == before, "nothing written anywhere"
    assert not (layout["outside"] / "planted.py").exists()


def test_verify_commands_come_from_the_config_and_run_in_a_scratch_copy(
        fake: FakeFrontier, layout: dict[str, Path]) -> None:
    probe = ("import pathlib; pathlib.Path('ran.txt').write_text('x'); "
             "assert 'Say hello' in pathlib.Path('app.py').read_text(); print('checked')")
    verify = {"timeout_s": 60, "routes": {"edit": [[sys.executable, "-c", probe]]}}
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]],
                                        verify))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=["app.py"], write=True)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "applied" and (layout["repo"] / "app.py").read_text() == AFTER
    step = next(s for s in body["trace"] if s["stage"] == "verify")
    assert step["outcome"] == "ok" and step["detail"]["checks"] == ["parse", "command"]
    command = step["detail"]["commands"][0]
    assert command["argv"][0] == sys.executable and command["exit"] == 0
    assert "checked" in command["output"]
    assert not (layout["repo"] / "ran.txt").exists(), "the command ran in a scratch copy"


def test_a_failing_config_command_escalates_with_its_output_in_the_trace(
        fake: FakeFrontier, layout: dict[str, Path]) -> None:
    fail = [sys.executable, "-c", "import sys; print('3 tests failed'); sys.exit(3)"]
    verify = {"repos": {str(layout["repo"]): [fail]}}
    sketch = fenced(make_sketch(BEFORE, AFTER, "python", k=1).text)
    fake.push(sketch, "text:" + search_replace_blocks(BEFORE, AFTER, "app.py"), fenced(AFTER))
    with running(create_app(fake_config(fake, layout["data"], [layout["root"]],
                                        verify))) as base:
        r = _edit(base, repo=str(layout["repo"]), files=["app.py"], write=True)
    body = r.json()
    assert r.status_code == 200 and body["status"] == "failed"
    verifies = [s for s in body["trace"] if s["stage"] == "verify"]
    assert len(verifies) == 3 and all("exited 3" in s["reason"] for s in verifies)
    assert "3 tests failed" in verifies[0]["detail"]["commands"][0]["output"]
    assert (layout["repo"] / "app.py").read_text() == BEFORE, "a failed edit writes nothing"


def test_off_loopback_every_endpoint_but_health_needs_a_key(fake: FakeFrontier,
                                                              tmp_path: Path) -> None:
    config = fake_config(fake, tmp_path / "data")
    config.server = config.server.model_copy(update={"host": "0.0.0.0",
                                                     "api_keys": ["sekrit"]})
    with running(create_app(config), host="0.0.0.0") as base:
        anonymous = {path: httpx.get(f"{base}{path}", timeout=30).status_code
                     for path in ("/healthz", "/readyz", "/v1/models", "/metrics")}
        edit = httpx.post(f"{base}/v1/edit", json={"instruction": "x", "texts": {"a.py": ""}},
                          timeout=30)
        wrong = httpx.get(f"{base}/v1/models", headers={"Authorization": "Bearer nope"})
        right = httpx.get(f"{base}/v1/models", headers={"Authorization": "Bearer sekrit"})
    assert anonymous["/healthz"] == 200 and anonymous["/readyz"] in (200, 503)
    assert anonymous["/v1/models"] == 401 and anonymous["/metrics"] == 401
    assert edit.status_code == 401 and edit.json()["error"]["type"] == "authentication_error"
    assert wrong.status_code == 401 and right.status_code == 200


def test_serve_off_loopback_without_keys_exits_saying_how(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COMPLEMENT_API_KEY"}
    env["COMPLEMENT_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.run([sys.executable, "-m", "router.cli", "serve", "--host", "0.0.0.0",
                           "--port", "0"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    assert "COMPLEMENT_API_KEY" in proc.stderr and "server.api_keys" in proc.stderr
    assert "Traceback" not in proc.stderr
