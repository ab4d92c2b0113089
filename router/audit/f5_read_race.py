"""Issue 41 F5: a file checked with ``lstat`` and read later, through a symlink swapped in.

The repository holds ``a_target_0.py``... and a package ``pkg/``; beside it, outside every
root, a secret file and a secret folder. A separate process swaps, as fast as it can, a
symlink to the secret file in and out of each ``a_target_i.py``'s place (``rename`` over
it, both ways), and a symlink to the secret folder in and out of ``pkg``'s place.
Meanwhile the probe indexes the repository over HTTP (``POST /v1/index``) and asks for the
secret's words (``POST /v1/retrieve``), round after round, then reads ``a_target_0.py``
and ``pkg/mod.py`` through the edit workspace (``Workspace.read``, what ``/v1/edit`` reads
a request's ``files`` with). Every answer holding the secret's text is a leak. The issue
saw 251 of 938 rounds leak; here, before the fix, about 1 in 15 HTTP answers did.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

from router.audit.common import Tally, serve

__all__ = ["probe", "SECONDS"]

SECONDS = 4.0
"""How long the HTTP rounds run; the workspace reads then run half as long."""

PUBLIC = "def canary_token_lookup(table):\n    return table.get('public')  # {n}\n"
SECRET = "def canary_token_lookup(table):\n    return '{canary}'  # the secret\n"

TARGETS = 4  # files swapped for links
OTHERS = 150  # files the scan stats after the targets and before it reads them: the window
# the swapper: its own process, so it races the server on the other core, not for the GIL
SWAPPER = r"""
import os, sys, time
TARGETS = @TARGETS@
HALF = 0.001   # each state (links in, files in) lasts this long: half the time each
repo, secret_file, secret_dir, stop = sys.argv[1:5]
targets = [os.path.join(repo, "a_target_%d.py" % i) for i in range(TARGETS)]
links = [os.path.join(repo, ".swap-link-%d" % i) for i in range(TARGETS)]
fresh = [os.path.join(repo, ".swap-file-%d" % i) for i in range(TARGETS)]
pkg = os.path.join(repo, "pkg")
real_pkg = os.path.join(os.path.dirname(repo), "pkg-real")


def hold(since):
    while time.perf_counter() - since < HALF:
        pass


n = 0
for link in links:
    os.symlink(secret_file, link)
while not os.path.exists(stop):
    n += 1
    for link, target in zip(links, targets):      # a_target_i.py -> the secret
        os.replace(link, target)
    os.rename(pkg, real_pkg)
    os.symlink(secret_dir, pkg)                   # pkg/ -> the secret folder
    since = time.perf_counter()
    for path in fresh:
        with open(path, "w") as fh:
            fh.write("def canary_token_lookup(table):\n    return table.get('public')  # %d\n" % n)
    hold(since)
    for path, target in zip(fresh, targets):      # a_target_i.py is a file again
        os.replace(path, target)
    os.unlink(pkg)
    os.rename(real_pkg, pkg)
    since = time.perf_counter()
    for link in links:
        os.symlink(secret_file, link)
    hold(since)
""".replace("@TARGETS@", str(TARGETS))


def _layout(tmp: Path, canary: str) -> tuple[Path, Path, Path]:
    root = tmp / "repos"
    repo = root / "proj"
    (repo / "pkg").mkdir(parents=True)
    for i in range(TARGETS):
        (repo / f"a_target_{i}.py").write_text(PUBLIC.format(n=0))
    (repo / "pkg" / "mod.py").write_text(PUBLIC.format(n="pkg"))
    for i in range(OTHERS):
        (repo / f"z_other_{i}.py").write_text(f"def helper_{i}(x):\n    return x + {i}\n")
    outside = tmp / "outside"
    (outside / "secret-pkg").mkdir(parents=True)
    secret_file = outside / "secret.py"
    secret_file.write_text(SECRET.format(canary=canary))
    (outside / "secret-pkg" / "mod.py").write_text(SECRET.format(canary=canary))
    return root, secret_file, outside / "secret-pkg"


def _config(tmp: Path, root: Path) -> dict:
    return {
        "data_dir": str(tmp / "data"),
        "workspace": {"allowed_roots": [str(root)]},
        "specialists": {"retrieval": {
            "class": "retrieval.specialist:RetrievalSpecialist",
            "options": {"allowed_root": str(root), "embedder": "hash:64",
                        "index_dir": str(tmp / "data" / "indexes")}}},
    }


def _wait_ready(client, base: str, tally: Tally) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.get(f"{base}/readyz").status_code == 200:
            return True
        time.sleep(0.05)
    return tally.expect(False, "the server never became ready")


def _http_rounds(base: str, canary: str, seconds: float, tally: Tally) -> None:
    import httpx

    with httpx.Client(timeout=60) as client:
        if not _wait_ready(client, base, tally):
            return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            r = client.post(f"{base}/v1/index", json={"path": "proj"})
            tally.attempts += 1
            tally.leaks += canary in r.text
            tally.expect(r.status_code == 200, f"/v1/index answered {r.status_code}: "
                                               f"{r.text[:200]}")
            r = client.post(f"{base}/v1/retrieve", json={
                "query": "canary_token_lookup table secret", "k": 20, "repo": "proj"})
            tally.attempts += 1
            tally.leaks += canary in r.text
            tally.expect(r.status_code == 200, f"/v1/retrieve answered {r.status_code}: "
                                               f"{r.text[:200]}")


def _workspace_rounds(repo: Path, canary: str, seconds: float, tally: Tally) -> None:
    """``/v1/edit`` reads a request's files with ``Workspace.read``: the same race, read
    in-process (an edit over HTTP would need a model to answer it)."""
    from router.edit import Workspace
    from specialists.base import SpecialistError

    workspace = Workspace(repo)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in ("a_target_0.py", "pkg/mod.py"):
            tally.attempts += 1
            try:
                text = workspace.read(name)
            except SpecialistError:  # refused (a link there now): the right answer
                continue
            except OSError as exc:  # an error the request would see as a 500
                what = f"Workspace.read({name!r}) raised {type(exc).__name__}: {exc}"
                if what not in tally.failures[-5:]:
                    tally.failures.append(what)
                continue
            tally.leaks += canary in text


def _say(tally: Tally, attempts: int, leaks: int, part: str) -> None:
    """Which part leaked, as a failure line (the totals alone do not say)."""
    if tally.leaks > leaks:
        tally.failures.append(f"{part}: {tally.leaks - leaks} of {tally.attempts - attempts} "
                              "answers held the secret file's text")


def probe(tmp: Path, seconds: float = SECONDS) -> Tally:
    tally = Tally("F5 read race")
    canary = f"F5-CANARY-{uuid.uuid4().hex}"
    root, secret_file, secret_dir = _layout(tmp, canary)
    stop = tmp / "stop"
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root / "proj"),
                                str(secret_file), str(secret_dir), str(stop)])
    try:
        with serve(_config(tmp, root)) as base:
            _http_rounds(base, canary, seconds, tally)
        _say(tally, 0, 0, "HTTP (/v1/index, /v1/retrieve)")
        attempts, leaks = tally.attempts, tally.leaks
        _workspace_rounds(root / "proj", canary, seconds / 2, tally)
        _say(tally, attempts, leaks, "Workspace.read")
        tally.expect(swapper.poll() is None, f"the swapper stopped early ({swapper.returncode})")
    finally:
        stop.touch()
        try:
            swapper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            swapper.kill()
            swapper.wait()
    return tally


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="complement-sec-f5-") as tmp:
        print(json.dumps(probe(Path(tmp)).as_dict()))
