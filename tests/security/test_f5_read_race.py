"""Issue 41 F5: a path checked, then read through a symlink swapped in meanwhile.

Reads of a file a request names open every component without following a link
(``specialists.paths.read_confined``); the indexer and the edit workspace read that way, so
a link swapped in after the check is refused or skipped, never read through.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specialists.base import ForbiddenError, SpecialistError

SECRET = "TOP-SECRET-F5-CANARY"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """``root/a/b/c.py`` and, outside, the same layout holding the secret."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    for base, text in ((root, "def c():\n    return 'public'\n"),
                       (outside, f"def c():\n    return '{SECRET}'\n")):
        (base / "a" / "b").mkdir(parents=True)
        (base / "a" / "b" / "c.py").write_text(text)
    return root, outside


def read_confined(root: Path, raw: str, **kwargs: object) -> bytes:
    from specialists.paths import read_confined as read  # imported here: each test fails
                                                          # on its own where it is missing
    return read(root, raw, **kwargs)  # type: ignore[arg-type]


def _swap_for_link(path: Path, target: Path) -> None:
    """``path`` (a file or a directory) replaced by a symlink to ``target``."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.symlink_to(target, target_is_directory=target.is_dir())


def test_read_confined_reads_a_regular_file(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    assert read_confined(root, "a/b/c.py") == b"def c():\n    return 'public'\n"
    assert read_confined(root, "./a//b/c.py", max_bytes=4) == b"def c"  # at most 4 + 1


@pytest.mark.parametrize("component", ["a", "a/b", "a/b/c.py"])
def test_read_confined_refuses_a_link_at_each_component(tree: tuple[Path, Path],
                                                        component: str) -> None:
    root, outside = tree
    _swap_for_link(root / component, outside / component)
    with pytest.raises(ForbiddenError, match="symbolic link") as err:
        read_confined(root, "a/b/c.py")
    assert os.path.basename(component) in str(err.value)
    from specialists.paths import ConfinedRoot

    with ConfinedRoot(root) as confined:  # the same through an opened root
        with pytest.raises(ForbiddenError):
            confined.read("a/b/c.py")


def test_read_confined_refuses_a_link_even_to_a_file_inside(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    (root / "alias.py").symlink_to(root / "a" / "b" / "c.py")
    with pytest.raises(ForbiddenError, match="symbolic link"):
        read_confined(root, "alias.py")


@pytest.mark.parametrize("raw", ["../outside/a/b/c.py", "/etc/passwd", "a/../../x", ""])
def test_read_confined_refuses_paths_out_of_the_root(tree: tuple[Path, Path], raw: str) -> None:
    root, _ = tree
    with pytest.raises(SpecialistError):
        read_confined(root, raw)


def test_read_confined_refuses_special_files_without_hanging(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    os.mkfifo(root / "pipe.py")  # opening a FIFO for reading would wait for a writer
    with pytest.raises(SpecialistError, match="not a regular file"):
        read_confined(root, "pipe.py")
    with pytest.raises(SpecialistError, match="not a regular file"):
        read_confined(root, "a")
    with pytest.raises(FileNotFoundError):
        read_confined(root, "a/missing.py")


# -- the indexer: a file or folder swapped for a link between the scan and the read --------
def _swap_after_scan(monkeypatch: pytest.MonkeyPatch, swaps: list[tuple[Path, Path]]) -> None:
    import retrieval.index as index_mod

    real_scan = index_mod.scan

    def scan_then_swap(root, flt=None):  # type: ignore[no-untyped-def]
        found = real_scan(root, flt)
        for path, target in swaps:
            _swap_for_link(path, target)
        return found

    monkeypatch.setattr(index_mod, "scan", scan_then_swap)


@pytest.mark.parametrize("component", ["a", "a/b", "a/b/c.py"])
def test_index_never_reads_through_a_link_swapped_in_after_the_scan(
        tree: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        component: str) -> None:
    from retrieval.index import Index, IndexConfig

    root, outside = tree
    (root / "other.py").write_text("def other():\n    return 1\n")
    _swap_after_scan(monkeypatch, [(root / component, outside / component)])
    index = Index(tmp_path / "ix", IndexConfig(embedder="hash:64"))
    stats = index.refresh(root)
    assert not any(SECRET in c.text for c in index.chunks)
    assert {c.path for c in index.chunks} == {"other.py"}
    assert stats.skipped.get("symlink_or_special", 0) >= 1


def test_index_over_http_never_returns_a_file_swapped_for_a_link(
        tree: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same swap, through the real server: /v1/index, then /v1/retrieve."""
    import httpx

    from router.audit.common import serve

    root, outside = tree
    (root / "a" / "b" / "d.py").write_text("def c_too():\n    return 'public'\n")
    _swap_after_scan(monkeypatch, [(root / "a" / "b" / "c.py", outside / "a" / "b" / "c.py")])
    config = {"data_dir": str(tmp_path / "data"),
              "specialists": {"retrieval": {
                  "class": "retrieval.specialist:RetrievalSpecialist",
                  "options": {"allowed_root": str(tmp_path), "embedder": "hash:64",
                              "index_dir": str(tmp_path / "data" / "ix")}}}}
    with serve(config) as base, httpx.Client(timeout=60) as client:
        for _ in range(200):
            if client.get(f"{base}/readyz").status_code == 200:
                break
        indexed = client.post(f"{base}/v1/index", json={"path": "root"})
        assert indexed.status_code == 200, indexed.text
        r = client.post(f"{base}/v1/retrieve", json={"query": "def c return", "k": 20,
                                                     "repo": "root"})
        assert r.status_code == 200, r.text
        assert SECRET not in r.text
        assert [h["path"] for h in r.json()["results"]] == ["a/b/d.py"]
        assert indexed.json()["skipped"].get("symlink_or_special", 0) >= 1


# -- the edit workspace: a link swapped in between confine() and the read ------------------
@pytest.mark.parametrize("component", ["a", "a/b/c.py"])
def test_workspace_read_never_reads_through_a_link_swapped_in_after_the_check(
        tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, component: str) -> None:
    import router.edit.workspace as workspace_mod
    from router.edit import Workspace

    root, outside = tree
    real_confine = workspace_mod.confine

    def confine_then_swap(*args, **kwargs):  # type: ignore[no-untyped-def]
        checked = real_confine(*args, **kwargs)
        _swap_for_link(root / component, outside / component)
        return checked

    monkeypatch.setattr(workspace_mod, "confine", confine_then_swap)
    with pytest.raises(ForbiddenError, match="symbolic link"):
        Workspace(root).read("a/b/c.py")


def test_workspace_read_follows_a_link_that_stays_inside(tree: tuple[Path, Path]) -> None:
    from router.edit import Workspace

    root, outside = tree
    (root / "alias.py").symlink_to(root / "a" / "b" / "c.py")
    assert Workspace(root).read("alias.py") == "def c():\n    return 'public'\n"
    assert Workspace(root).read("a/new.py") == ""  # a new file
    (root / "out.py").symlink_to(outside / "a" / "b" / "c.py")
    with pytest.raises(ForbiddenError):
        Workspace(root).read("out.py")


# -- the probe: a process swapping links while the server indexes and answers ----------------
def test_probe_read_race(tmp_path: Path) -> None:
    from router.audit.f5_read_race import probe

    tally = probe(tmp_path, seconds=2.0)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 60, tally.as_dict()
