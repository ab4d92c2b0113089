"""The global reading of a sketch (``specialists.apply.align``) and the cross-check that
makes the applier abstain when the two readings of a sketch disagree."""

from __future__ import annotations

import pytest

from specialists.apply import apply_sketch
from specialists.apply.merge_checks import cross_check
from specialists.apply.merger import Merger
from specialists.apply.result import Abstain, ApplyOptions
from specialists.apply.sketch_lines import SketchLines
from specialists.apply.text import split_lines

ORIGINAL = (
    "def load(path):\n"
    "    with open(path) as fh:\n"
    "        return fh.read()\n"
    "\n"
    "\n"
    "def save(path, text):\n"
    "    with open(path, 'w') as fh:\n"
    "        fh.write(text)\n"
)


def _merger(original: str, sketch: str) -> Merger:
    olines = split_lines(original)
    return Merger(olines, SketchLines(split_lines(sketch), set(olines.keys)), "python",
                  ApplyOptions())


def test_global_reading_places_every_line_and_keeps_marked_runs() -> None:
    sketch = ("# ... existing code ...\n"
              "def save(path, text):\n"
              "    with open(path, 'w', encoding='utf-8') as fh:\n"
              "        fh.write(text)\n")
    merger = _merger(ORIGINAL, sketch)
    out, origin = merger.merge_dp()
    assert out[:6] == ORIGINAL.split("\n")[:6]
    assert out[6] == "    with open(path, 'w', encoding='utf-8') as fh:"
    assert origin == [0, 1, 2, 3, 4, 5, -1, 7]
    # the context lines are matched, the marker's run is the whole of load() and the blanks
    assert merger.sm[1] == 5 and merger.sm[3] == 7 and merger.dp_spans[0] == (0, 5)


def test_global_reading_abstains_when_a_block_fits_two_places_equally() -> None:
    original = "a = 1\nreturn a\n\nb = 2\nreturn a\n\nc = 3\n"
    sketch = "# ...\nreturn a\nlog(a)\n# ...\n"
    with pytest.raises(Abstain, match="more than one place"):
        _merger(original, sketch).merge_dp()


def test_order_of_blocks_decides_a_repeated_anchor() -> None:
    # "return a" occurs twice; the first block pins the first, so the second block (after it)
    # can only mean the second one.
    original = "def f():\n    a = 1\n    return a\n\ndef g():\n    a = 2\n    return a\n"
    sketch = ("# ...\n    a = 1\n    return a\n# ...\n    a = 2\n    log(a)\n    return a\n")
    result = apply_sketch(original, sketch, path="m.py")
    assert result.applied, result.reason
    assert result.merged == original.replace("    a = 2\n", "    a = 2\n    log(a)\n")


def test_a_marker_may_keep_nothing_at_the_end() -> None:
    sketch = ("def load(path):\n    with open(path) as fh:\n        return fh.read()\n\n\n"
              "def save(path, text):\n    with open(path, 'w') as fh:\n        fh.write(text)\n"
              "        fh.flush()\n# ... existing code ...\n")
    result = apply_sketch(ORIGINAL, sketch, path="m.py")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL + "        fh.flush()\n"


def test_cross_check_abstains_when_the_readings_differ() -> None:
    sketch = ("# ... existing code ...\n"
              "def save(path, text):\n"
              "    with open(path, 'w', encoding='utf-8') as fh:\n"
              "        fh.write(text)\n")
    olines = split_lines(ORIGINAL)
    sk = SketchLines(split_lines(sketch), set(olines.keys))
    right, _ = _merger(ORIGINAL, sketch).merge_dp()
    cross_check(right, olines, sk, "python", ApplyOptions())  # agrees: no abstain
    wrong = right[:6] + right[7:]  # the changed line lost
    with pytest.raises(Abstain, match="two readings"):
        cross_check(wrong, olines, sk, "python", ApplyOptions())


def test_cross_check_can_be_switched_off() -> None:
    sketch = "# ...\ndef save(path, text):\n    with open(path, 'wb') as fh:\n        fh.write(text)\n"
    on = apply_sketch(ORIGINAL, sketch, path="m.py")
    off = apply_sketch(ORIGINAL, sketch, path="m.py", options=ApplyOptions(cross_check=False))
    assert on.applied and off.applied and on.merged == off.merged


def test_sketch_ending_in_code_writes_the_files_end_when_only_blank_lines_follow() -> None:
    original = "import os\n\n\ndef f():\n    return os.getcwd()\n\n"
    sketch = "# ...\ndef f():\n    return os.getcwd()\n"
    result = apply_sketch(original, sketch + "", path="m.py")
    # nothing changed but the trailing blank line, which the sketch's end leaves out
    assert result.applied, result.reason
    assert result.merged == "import os\n\n\ndef f():\n    return os.getcwd()\n"
    # A new last line and no marker, with another definition after it: that definition may
    # be what a left-out marker stood for, so the applier asks instead of deleting it.
    longer = original + "def g():\n    pass\n"
    asked = apply_sketch(longer, sketch.replace("getcwd()", "getcwd() or '.'"), path="m.py")
    assert asked.status == "abstained" and "no marker" in (asked.reason or "")
    # ... and so does a long tail: the sketch rewrote the file's end, or its new last line
    # lost the marker after it (issue 16: keeping was never right on the development sample)
    tail = original + "".join(f"def g{i}():\n    return {i}\n\n" for i in range(5))
    asked = apply_sketch(tail, sketch.replace("getcwd()", "getcwd() or '.'"), path="m.py")
    assert asked.status == "abstained" and "no marker" in (asked.reason or "")
    # with the marker, the tail is kept
    kept = apply_sketch(tail, sketch.replace("getcwd()", "getcwd() or '.'") + "# ...\n",
                        path="m.py")
    assert kept.applied and kept.merged is not None and kept.merged.endswith("    return 4\n\n")


def test_readings_that_differ_in_blank_lines_only_keep_the_one_with_more() -> None:
    from types import SimpleNamespace

    from specialists.apply.merge_checks import _more_blank_lines_only

    sure, guessed = SimpleNamespace(blank_guesses=0), SimpleNamespace(blank_guesses=1)
    out = ["def f():", "    pass", "", "", "x = 1"]
    alt = ["def f():", "    pass", "", "x = 1"]
    assert _more_blank_lines_only(out, alt, sure)  # type: ignore[arg-type]
    assert not _more_blank_lines_only(alt, out, sure)  # type: ignore[arg-type]  # fewer
    assert not _more_blank_lines_only(out, alt, guessed)  # type: ignore[arg-type]
    assert not _more_blank_lines_only(out, ["def f():", "    pass", "", "x = 2"], sure)  # type: ignore[arg-type]
    assert not _more_blank_lines_only(out, ["def f():", "  pass", "x = 1"], sure)  # type: ignore[arg-type]
