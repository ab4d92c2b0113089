"""The edit workspace: paths confined, writes all or nothing, scratch copies apart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from router.edit import Workspace
from specialists.base import ForbiddenError, SpecialistError
from specialists.paths import confine, resolve_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "a.py").write_text("a = 0\n")
    (root / "pkg" / "b.py").write_text("b = 0\n")
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    return root


def given(repo: Path, *paths: str) -> Workspace:
    """A workspace whose edit was given ``paths`` (as the cascade gives it the request's)."""
    ws = Workspace(repo)
    ws.allow(paths)
    return ws


@pytest.mark.parametrize("raw", ["../x", "/etc/passwd", "out/x", "pkg/../../x", "~/x", "",
                                 "a\x00b", "C:\\x"])
def test_confine_refuses_paths_out_of_the_root(repo: Path, raw: str) -> None:
    with pytest.raises(SpecialistError):  # ForbiddenError, or a plain one for a malformed path
        confine(repo, raw)


def test_confine_resolves_paths_inside(repo: Path) -> None:
    assert confine(repo, "pkg/b.py") == (repo / "pkg" / "b.py").resolve()
    assert confine(repo, "./new/c.py") == (repo / "new" / "c.py").resolve()


def test_resolve_repo_holds_a_repository_to_the_roots(repo: Path, tmp_path: Path) -> None:
    assert resolve_repo(str(repo), [tmp_path]) == repo.resolve()
    assert resolve_repo("repo", [tmp_path]) == repo.resolve()
    for bad in [str(tmp_path / "outside"), str(repo / "out"), "repo/../outside"]:
        with pytest.raises(ForbiddenError):
            resolve_repo(bad, [repo])


@pytest.mark.parametrize("raw", ["~no-such-user-of-complement/repo", "~%\x18"])
def test_resolve_repo_answers_an_unknown_users_home_with_a_clear_error(
        repo: Path, tmp_path: Path, raw: str) -> None:
    # pathlib raises RuntimeError for "~name" when no user has that name (a fuzzer found
    # POST /v1/index answering 500 for {"path": "~%\x18"})
    with pytest.raises(SpecialistError, match="no user of this machine"):
        resolve_repo(raw, [tmp_path])


@pytest.mark.parametrize("raw", ["a" * 5000, "a/" * 3000, "repo/" + "b" * 300])
def test_resolve_repo_answers_a_name_too_long_with_a_clear_error(
        repo: Path, tmp_path: Path, raw: str) -> None:
    # is_dir raises ENAMETOOLONG there; POST /v1/index, /v1/retrieve and /v1/edit answered 500
    with pytest.raises(SpecialistError, match="cannot be used: File name too long"):
        resolve_repo(raw, [tmp_path])


def test_write_is_all_or_nothing_when_a_target_cannot_be_made(repo: Path) -> None:
    (repo / "blocker").write_text("a file where a directory would go\n")
    with pytest.raises(OSError):
        given(repo, "a.py", "new/dir/c.py", "blocker/x.py").write(
            {"a.py": "a = 1\n", "new/dir/c.py": "c\n", "blocker/x.py": "x\n"})
    assert (repo / "a.py").read_text() == "a = 0\n"
    assert not (repo / "new").exists(), "directories made for the failed write are removed"
    assert sorted(p.name for p in repo.iterdir()) == ["a.py", "blocker", "out", "pkg"]


def test_write_puts_back_what_it_swapped_when_a_later_swap_fails(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.replace
    calls = []

    def failing(src, dst):  # type: ignore[no-untyped-def]
        calls.append(dst)
        if str(dst).endswith("b.py") and len(calls) == 2:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        given(repo, "a.py", "pkg/b.py").write({"a.py": "a = 1\n", "pkg/b.py": "b = 1\n"})
    assert (repo / "a.py").read_text() == "a = 0\n" and (repo / "pkg/b.py").read_text() == "b = 0\n"
    leftovers = [p.name for p in repo.rglob(".*") if p.is_file()]
    assert leftovers == [], "no staged or backup file is left behind"


def test_write_refuses_a_path_through_a_symlink_before_writing_anything(repo: Path) -> None:
    with pytest.raises(ForbiddenError):
        given(repo, "a.py", "out/planted.py").write({"a.py": "a = 1\n", "out/planted.py": "x\n"})
    assert (repo / "a.py").read_text() == "a = 0\n"
    assert list((repo / "out").iterdir()) == []


def test_scratch_is_a_copy_the_user_tree_never_sees(repo: Path) -> None:
    ws = Workspace(repo)
    with ws.scratch({"a.py": "a = 2\n", "pkg/new.py": "n\n"}) as scratch:
        assert (scratch / "a.py").read_text() == "a = 2\n"
        assert (scratch / "pkg" / "b.py").read_text() == "b = 0\n"
        (scratch / "junk.txt").write_text("made by a test runner")
    assert not scratch.exists()
    assert (repo / "a.py").read_text() == "a = 0\n" and not (repo / "junk.txt").exists()
    assert not (repo / "pkg" / "new.py").exists()


def test_write_refuses_a_file_the_edit_was_not_given(repo: Path) -> None:
    with pytest.raises(ForbiddenError, match="'pkg/b.py'.*did not give the edit"):
        given(repo, "a.py").write({"a.py": "a = 1\n", "pkg/b.py": "b = 1\n"})
    assert (repo / "a.py").read_text() == "a = 0\n" and (repo / "pkg/b.py").read_text() == "b = 0\n"


@pytest.mark.parametrize("path", [".git/config", ".github/workflows/x.yml", "pkg/.hooks/x",
                                  ".git", "link.py"])
def test_write_never_goes_under_a_dot_folder_or_through_a_link(repo: Path, path: str) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / "link.py").symlink_to(repo / ".git" / "config")
    with pytest.raises(ForbiddenError, match="nothing was written"):
        given(repo, "a.py", path).write({"a.py": "a = 1\n", path: "planted\n"})
    assert (repo / "a.py").read_text() == "a = 0\n"
    assert (repo / ".git" / "config").read_text() == "[core]\n"
    assert not (repo / ".github").exists() and not (repo / "pkg" / ".hooks").exists()


def test_scratch_holds_no_symlink(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "outside" / "secret.txt").write_text("s\n")
    (repo / "inside_link.py").symlink_to(repo / "a.py")
    (repo / "secret_link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (repo / "pkg_link").symlink_to(repo / "pkg", target_is_directory=True)
    os.mkfifo(repo / "fifo")  # copying one would block on reading it
    with Workspace(repo).scratch({}) as scratch:
        links = [p for p in scratch.rglob("*") if p.is_symlink()]
        assert links == []
        assert (scratch / "inside_link.py").read_text() == "a = 0\n", "a link inside: its file"
        names = sorted(p.name for p in scratch.iterdir())
        assert names == ["a.py", "inside_link.py", "pkg"], "links out, to folders, FIFOs: left out"
