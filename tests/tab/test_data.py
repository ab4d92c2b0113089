"""``complement data from-git`` writes the shared data's JSONL format."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess

import pytest

from specialists.tab.data import from_git, load_pairs
from specialists.tab.replay import replay_text

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

FIELDS = {"repo", "commit", "parent", "date", "message", "path", "language", "hunks", "before", "after"}


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"})


def _repo(tmp_path):
    repo = tmp_path / "proj"
    repo.mkdir()
    _git(repo, "init", "-q")
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(12))
    (repo / "mod.py").write_text(body)
    (repo / "notes.txt").write_text("a\n" * 30)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    (repo / "mod.py").write_text(body.replace("return x + 3", "return x * 3") + "def g():\n    pass\n")
    (repo / "notes.txt").write_text("b\n" * 30)
    _git(repo, "commit", "-q", "-am", "change f3, add g")
    (repo / "mod.py").write_text((repo / "mod.py").read_text() + "\n")  # whitespace only
    _git(repo, "commit", "-q", "-am", "blank line")
    return repo


def test_from_git_pairs(tmp_path) -> None:
    pairs = from_git(_repo(tmp_path), name="proj")
    assert len(pairs) == 1  # notes.txt is not code; the whitespace-only commit is skipped
    p = pairs[0]
    assert p.repo == "proj" and p.path == "mod.py" and p.language == "python"
    assert p.message == "change f3, add g" and p.hunks == 2
    assert replay_text(p) == p.after


def test_cli_writes_same_format(tmp_path) -> None:
    from router.commands.tab import main

    out = tmp_path / "proj.jsonl.gz"
    assert main(["data", "from-git", str(_repo(tmp_path)), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in gzip.open(out, "rt")]
    assert len(rows) == 1 and set(rows[0]) == FIELDS
    assert [p.path for p in load_pairs(out)] == ["mod.py"]


def test_cli_not_a_repository(tmp_path, capsys) -> None:
    from router.commands.tab import main

    assert main(["data", "from-git", str(tmp_path), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "from-git" in capsys.readouterr().err


def test_splits_name_any_projects_and_a_missing_one_is_named(tmp_path) -> None:
    """Benchmarks take their projects as arguments: a split name or NAMEs of a folder."""
    from specialists.tab.data import SPLIT, Pair, load_split, split_projects, write_pairs

    assert split_projects("test") == SPLIT["test"]
    assert split_projects(" alpha, beta ,") == ("alpha", "beta")
    with pytest.raises(ValueError, match="no projects"):
        split_projects(" , ")
    for name in ("alpha", "beta"):
        write_pairs([Pair(repo=name, path="m.py", language="python", before="a = 1\n",
                          after="a = 2\n", commit="0" * 40)], tmp_path / f"{name}.jsonl.gz")
    assert {p.repo for p in load_split(tmp_path, "alpha,beta")} == {"alpha", "beta"}
    with pytest.raises(FileNotFoundError, match="gamma.*projects in .*alpha, beta"):
        load_split(tmp_path, "alpha,gamma")
