"""make_sketch writes lazy sketches the applier turns back into the real file."""

from __future__ import annotations

import pytest

from specialists.apply import apply_sketch, make_sketch

BEFORE = """import os


def load(path):
    with open(path) as f:
        return f.read()


def save(path, data):
    with open(path, "w") as f:
        f.write(data)


def size(path):
    return os.path.getsize(path)


def unused():
    return None
"""
AFTER = BEFORE.replace("        return f.read()\n", "        data = f.read()\n    return data.strip()\n") \
    .replace("\n\ndef unused():\n    return None\n", "")


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_round_trip_each_k(k: int) -> None:
    sketch = make_sketch(BEFORE, AFTER, "python", k=k, seed=k)
    assert "# " in sketch.text  # markers in the file's comment syntax
    result = apply_sketch(BEFORE, sketch.text, language="python")
    assert result.status == "applied", (result.reason, sketch.text)
    assert result.merged == AFTER


def test_whole_function_and_remove_comments() -> None:
    sketch = make_sketch(BEFORE, AFTER, "python", k=1, whole_function=True, deletions="remove")
    assert "def load(path):" in sketch.text
    assert "remove" in sketch.text or "delete" in sketch.text
    assert apply_sketch(BEFORE, sketch.text, language="python").merged == AFTER


def test_markers_sit_at_the_span_indentation() -> None:
    before = "def f():\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n    e = 5\n"
    after = before.replace("c = 3", "c = 30")
    sketch = make_sketch(before, after, "python", k=1, seed=3)
    marker_lines = [line for line in sketch.text.splitlines() if line.strip().startswith("#")]
    assert marker_lines and all(line.startswith(("    #", "#")) for line in marker_lines)
    assert any(line.startswith("    #") for line in marker_lines)


def test_labels() -> None:
    lines = "".join(f"v{i} = {i}\n" for i in range(9))
    unique = make_sketch(lines, lines.replace("v4 = 4", "v4 = 40"), "python", k=1)
    assert unique.label == "unique"
    twins = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x\n"
    edited = twins.replace("    x = 1\n    return x\n", "    x = 1\n    y = 2\n    return x\n", 1)
    assert make_sketch(twins, edited, "python", k=1).label == "ambiguous"


@pytest.mark.parametrize("noise", ["shift", "no_first_marker", "no_last_marker"])
def test_noisy_variants_still_apply(noise: str) -> None:
    tail = "".join(f"\n\ndef tail{i}():\n    return {i}\n" for i in range(3))
    before, after = BEFORE + tail, AFTER + tail
    sketch = make_sketch(before, after, "python", k=3, noise=noise, seed=1)
    assert sketch.changed
    BEFORE_, AFTER_ = before, after
    result = apply_sketch(BEFORE_, sketch.text, language="python")
    assert result.merged == AFTER_, (result.reason, sketch.text)


def test_go_sketch_uses_slash_comments() -> None:
    before = "package x\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 2\n}\n"
    after = before.replace("return 2", "return 3")
    sketch = make_sketch(before, after, "go", k=1)
    assert "// " in sketch.text
    assert apply_sketch(before, sketch.text, language="go").merged == after


@pytest.mark.parametrize("k", [0, 1, 2])
def test_a_final_newline_added_by_the_commit_is_shown(k: int) -> None:
    # The commit's only change at the end is the newline: a sketch that hid the last line
    # under a marker could not say so, and no applier could get the file right.
    before = AFTER.rstrip("\n").replace("data.strip()", "data")
    after = AFTER
    sketch = make_sketch(before, after, "python", k=k, seed=k)
    assert sketch.text.rstrip("\n").endswith("return os.path.getsize(path)")
    result = apply_sketch(before, sketch.text, language="python")
    assert result.applied, (result.reason, sketch.text)
    assert result.merged == after
