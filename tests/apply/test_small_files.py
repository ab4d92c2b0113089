"""Tiny files: where a short new definition resembles the only one there, the applier must
not trade one for the other on similarity alone (issue 20's silent wrong merge)."""

from __future__ import annotations

import pytest

from specialists.apply import apply_sketch

F = "def f():\n    return 1\n"
MARKER = "# ... existing code ...\n"


def test_a_new_function_after_a_marker_does_not_replace_the_only_one() -> None:
    result = apply_sketch(F, MARKER + "\ndef g():\n    return 2\n", path="a.py")
    assert not result.applied and "resembles 'f'" in (result.reason or "")


def test_the_same_sketch_on_a_longer_file_abstains_too() -> None:
    longer = F + "\n\ndef h():\n    return 3\n"
    result = apply_sketch(longer, MARKER + "\ndef g():\n    return 2\n", path="a.py")
    assert not result.applied


def test_a_marker_and_nothing_else_abstains() -> None:
    result = apply_sketch(F, MARKER, path="a.py")
    assert not result.applied and "only markers" in (result.reason or "")


def test_a_sketch_longer_than_the_file_that_repeats_it_applies() -> None:
    sketch = F + "\n\ndef g():\n    return 2\n\n\ndef k():\n    return 5\n"
    result = apply_sketch(F, sketch, path="a.py")
    assert result.applied and result.merged == sketch


@pytest.mark.parametrize("original", [F, "class A:\n    pass\n", "def f(x):\n    return x\n"])
def test_a_one_definition_file_with_its_definition_changed_in_place(original: str) -> None:
    sketch = original.replace("1", "10").replace("pass", "x = 1").replace("return x",
                                                                          "return x + 1")
    result = apply_sketch(original, sketch, path="a.py")
    assert result.applied and result.merged == sketch


def test_a_whole_file_rename_is_never_merged_wrong() -> None:
    original = "def load(path):\n    with open(path) as fh:\n        return fh.read()\n"
    sketch = "def read(path):\n    with open(path) as fh:\n        return fh.read()\n"
    result = apply_sketch(original, sketch, path="a.py")
    assert not result.applied or result.merged == sketch
