from __future__ import annotations

from retrieval.merkle import FileState, Tree, diff_trees


def tree(**files: str) -> Tree:
    return Tree({k.replace("__", "/"): FileState(1, 1, v) for k, v in files.items()})


def test_identical_trees_have_equal_root_and_no_diff() -> None:
    a, b = tree(a__x="1", a__y="2", z="3"), tree(a__x="1", a__y="2", z="3")
    assert a.root_hash == b.root_hash
    assert diff_trees(a, b) == ([], [], [])


def test_diff_reports_added_changed_removed() -> None:
    old = tree(a__x="1", a__y="2", b__c__d="3", z="4")
    new = tree(a__x="1", a__y="9", b__c__e="5", z="4")
    assert diff_trees(old, new) == (["b/c/e"], ["a/y"], ["b/c/d"])
    assert old.dir_hashes()["a"] != new.dir_hashes()["a"]


def test_unchanged_directory_keeps_its_hash() -> None:
    old, new = tree(a__x="1", b__y="2"), tree(a__x="1", b__y="3")
    assert old.dir_hashes()["a"] == new.dir_hashes()["a"]
    assert old.dir_hashes()["b"] != new.dir_hashes()["b"]


def test_json_round_trip() -> None:
    t = tree(a__x="1")
    assert Tree.from_json(t.to_json()).root_hash == t.root_hash
