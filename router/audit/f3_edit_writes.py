"""Issue 41 F3: a ``/v1/edit`` answer must write only the files the request named.

The probe serves the real app over HTTP with one route whose model is the fake frontier,
and a small git repository under the allowed root. Each attack is one ``/v1/edit`` request
for ``files: ["app.py"], write: true`` whose scripted model answer (a hostile or prompt-
injected model) names another path: a new file, ``.git/hooks/post-commit``, ``.git/config``
with an fsmonitor command, ``../`` and absolute paths, a dot-folder (``.github/...``), in
each answer format. A few attacks are the request's own (a ``.git`` path in ``files``, a
file that is a symlink into ``.git``). Each must be a 403 naming the path, and nothing may
change under the repository or the probe's folder (the server's data folder aside).
Finally ``git status`` runs in the repository (if git is installed): an fsmonitor planted
in ``.git/config`` would run there and leave its sentinel.

Two controls must succeed, so a server that refuses everything does not pass: an edit of
``app.py`` alone, and a new file the request names in ``files``.

``python -m router.audit.f3_edit_writes`` prints the tally.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from router.audit.common import Tally, changed, serve, snapshot

APP = 'def greet(name):\n    return "hello " + name\n'
APP_NEW = 'def greet(name):\n    """Say hello."""\n    return "hello " + name\n'


def layout(tmp: Path) -> dict[str, Path]:
    """tmp/repos/repo (a git repository: app.py, .git/config, a link into .git, a link out)
    and tmp/outside (a place no edit may reach)."""
    roots = tmp / "repos"
    repo = roots / "repo"
    repo.mkdir(parents=True)
    (repo / "app.py").write_text(APP)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    else:
        (repo / ".git" / "hooks").mkdir(parents=True)
        (repo / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep\n")
    (repo / "config_link.py").symlink_to(repo / ".git" / "config")
    (repo / "out").symlink_to(outside, target_is_directory=True)
    return {"root": roots, "repo": repo, "outside": outside, "data": tmp / "data",
            "sentinel": tmp / "fsmonitor-ran"}


def config(fake_url: str, paths: dict[str, Path], verify: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    """A config as YAML would give it: one route, ``edit``, to the fake frontier."""
    return {
        "workspace": {"allowed_roots": [str(paths["root"])], "verify": verify or {}},
        "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}},
        "data_dir": str(paths["data"]),
        "frontier": {"retry": {"attempts": 1, "backoff_initial_s": 0.01,
                               "backoff_max_s": 0.02}},
        "models": {"fake": {"model": "openai/fake-sonnet", "api_base": fake_url,
                            "api_key": "k", "input_cost_per_token": 3e-6,
                            "output_cost_per_token": 1.5e-5}},
        "routes": {"edit": {"targets": ["fake"]}},
    }


def answer(fmt: str, files: dict[str, str]) -> str:
    """The fake frontier's behaviour answering exactly ``files`` in format ``fmt``."""
    if fmt == "search_replace":
        text = "".join(f"{path}\n<<<<<<< SEARCH\n=======\n{body}>>>>>>> REPLACE\n"
                       for path, body in files.items())
    else:
        text = "".join(f"```python {path}\n{body}```\n" for path, body in files.items())
    return "text64:" + base64.b64encode(text.encode()).decode()


def attacks(paths: dict[str, Path]) -> list[dict[str, Any]]:
    """(name, answer files, strategy, request changes, the param and path a 403 names)."""
    fsmonitor = f'[core]\n\tfsmonitor = "touch {paths["sentinel"]}"\n'
    hook = f"#!/bin/sh\ntouch {paths['sentinel']}\n"
    absolute = str(paths["outside"] / "abs.py")
    out: list[dict[str, Any]] = []
    for fmt in ("whole_file", "search_replace", "sketch"):
        out += [
            {"name": f"{fmt}: a new file not named", "fmt": fmt,
             "files": {"app.py": APP_NEW, "evil_new.py": "import os\n"}, "path": "evil_new.py"},
            {"name": f"{fmt}: .git/hooks/post-commit", "fmt": fmt,
             "files": {".git/hooks/post-commit": hook}, "path": ".git/hooks/post-commit"},
            {"name": f"{fmt}: .git/config with fsmonitor", "fmt": fmt,
             "files": {"app.py": APP_NEW, ".git/config": fsmonitor}, "path": ".git/config"},
            {"name": f"{fmt}: ../ out of the repository", "fmt": fmt,
             "files": {"../../outside/planted.py": "x = 1\n"}, "path": "../../outside/planted.py"},
            {"name": f"{fmt}: a dot-folder", "fmt": fmt,
             "files": {".github/workflows/x.yml": "on: push\n"},
             "path": ".github/workflows/x.yml"},
            {"name": f"{fmt}: an absolute path", "fmt": fmt,
             "files": {absolute: "x = 1\n"}, "path": absolute},
        ]
    out += [
        {"name": "whole_file: a symlink out of the repository", "fmt": "whole_file",
         "files": {"out/planted.py": "x = 1\n"}, "path": "out/planted.py"},
        {"name": "whole_file: a path through .. inside", "fmt": "whole_file",
         "files": {"sub/../.git/config": fsmonitor}, "path": "sub/../.git/config"},
        {"name": "whole_file: .GIT/config (case)", "fmt": "whole_file",
         "files": {".GIT/config": fsmonitor}, "path": ".GIT/config"},
        {"name": "request: .git/config in files", "fmt": "whole_file",
         "files": {".git/config": fsmonitor}, "path": ".git/config",
         "request": {"files": [".git/config"]}, "param": "files", "asks_model": False},
        {"name": "request: .github/workflows in files", "fmt": "whole_file",
         "files": {".github/workflows/x.yml": "on: push\n"}, "path": ".github/workflows/x.yml",
         "request": {"files": [".github/workflows/x.yml"]}, "param": "files",
         "asks_model": False},
        {"name": "request: a file that is a link into .git", "fmt": "whole_file",
         "files": {"config_link.py": fsmonitor}, "path": "config_link.py",
         "request": {"files": ["config_link.py"]}},
    ]
    return out


def _post(base: str, **body: Any) -> httpx.Response:
    payload = {"instruction": "add a docstring to greet", "route": "edit", "write": True,
               **body}
    return httpx.post(f"{base}/v1/edit", json=payload, timeout=60)


def _state(tmp: Path) -> dict[str, str]:
    return {p: h for p, h in snapshot(tmp).items() if not p.startswith("data/")}


def probe(tmp: Path) -> Tally:
    from router.demo_provider import DemoProvider

    tally = Tally("f3_edit_writes")
    paths = layout(tmp)
    repo = paths["repo"]
    fake = DemoProvider().start()
    try:
        with serve(config(fake.url, paths)) as base:
            for attack in attacks(paths):
                tally.attempts += 1
                before = _state(tmp)
                asked = len(fake.requests)
                fake.push(answer(attack["fmt"], attack["files"]))
                request = {"repo": str(repo), "files": ["app.py"], "strategy": attack["fmt"],
                           **attack.get("request", {})}
                r = _post(base, **request)
                name = attack["name"]
                _expect_refused(tally, r, name, attack["path"], attack.get("param", "answer"))
                if attack.get("asks_model", True) is False:
                    tally.expect(len(fake.requests) == asked, f"{name}: a model was asked")
                    fake.script.clear()
                tally.writes_outside += len(changed(before, _state(tmp)))
            _controls(tally, base, fake, repo, tmp)
        if shutil.which("git") and (repo / ".git" / "HEAD").exists():
            subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True,
                           timeout=60)
        if paths["sentinel"].exists():
            tally.commands_run += 1
    finally:
        fake.stop()
    return tally


def _expect_refused(tally: Tally, r: httpx.Response, name: str, path: str, param: str) -> None:
    if not tally.expect(r.status_code == 403, f"{name}: status {r.status_code}, not 403: "
                                              f"{r.text[:200]}"):
        return
    error = r.json().get("error", {})
    tally.expect(error.get("param") == param, f"{name}: param {error.get('param')!r}")
    tally.expect(path in error.get("message", ""), f"{name}: the error does not name {path!r}")


def _controls(tally: Tally, base: str, fake: Any, repo: Path, tmp: Path) -> None:
    """An allowed edit and an allowed new file are written (and nothing else is)."""
    before = _state(tmp)
    fake.push(answer("whole_file", {"app.py": APP_NEW}))
    r = _post(base, repo=str(repo), files=["app.py"], strategy="whole_file")
    tally.expect(r.status_code == 200 and r.json().get("written") == ["app.py"],
                 f"control: an edit of app.py was not written: {r.status_code} {r.text[:200]}")
    fake.push(answer("whole_file", {"app.py": APP, "pkg/helpers.py": "x = 1\n"}))
    r = _post(base, repo=str(repo), files=["app.py", "pkg/helpers.py"], strategy="whole_file")
    tally.expect(r.status_code == 200 and sorted(r.json().get("written") or [])
                 == ["app.py", "pkg/helpers.py"],
                 f"control: a new file the request named was not written: {r.status_code} "
                 f"{r.text[:200]}")
    tally.writes_outside += len(changed(before, _state(tmp),
                                        {"repos/repo/app.py", "repos/repo/pkg/helpers.py"}))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="complement-sec-f3-") as tmp:
        result = probe(Path(tmp))
    print(json.dumps(result.as_dict(), indent=2))
    sys.exit(0 if result.ok else 1)
