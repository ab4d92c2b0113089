"""Sketches that read two ways are refused, not guessed (the applier, issue 36: tests by
kind of sketch; first written as issue 16's rounds 9, 10 and 11). A context-only block
whose lines also stand a little further on (back), or that also fits with a line deleted,
abstains; a sketch whose global reading has two optimal alignments writing different code
abstains, one differing only in blank lines does not overrule the piecewise reading."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.merger import AMBIGUOUS


SETATTR = '''import pytest

from attr._compat import PY36


class TestFunctional:
    def test_a(self):
        src = make()
        assert "self.x = x" in src
        assert object.__setattr__ == D.__setattr__

    @pytest.mark.parametrize("slots", [True, False])
    def test_b(self, slots):
        src = make(slots)
        assert "self.y = y" in src
        assert object.__setattr__ == D.__setattr__

    @pytest.mark.skipif(not PY36, reason="NG APIs are 3.6+")
    @pytest.mark.parametrize("slots", [True, False])
    def test_c(self, slots):
        assert C(slots).x == 1
'''

SETATTR_SKETCH = '''import sys

import pytest

# ... keep existing code ...
        assert object.__setattr__ == D.__setattr__

    @pytest.mark.parametrize("slots", [True, False])
    # ... keep existing code ...
'''


def test_context_block_that_also_fits_with_a_line_deleted_abstains() -> None:
    # the second block changes nothing where its lines first occur, but a few lines on it
    # fits with the skipif decorator between its lines: shown deleted by omission there, or
    # a block written for nothing here
    result = apply_sketch(SETATTR, SETATTR_SKETCH, path="test_functional.py")
    assert not result.applied
    assert "fits nearby" in result.reason


ROWS = '''from rich.table import Table


def make_table():
    table = Table.grid()
    table.add_row(
        "Sponsor",
        "https://github.com/sponsors/someone",
    )
    table.add_row(
        "Coffee",
        "https://ko-fi.com/someone",
    )
    table.add_row(
        "Twitter",
        "https://twitter.com/someone",
    )
    return table
'''

ROWS_TAIL_SKETCH = '''from rich.table import Table
from rich.text import Text

# ... existing code ...
        "Sponsor",
        "https://github.com/sponsors/someone",
    )
    table.add_row(
        # ... existing code ...
'''

ROWS_HEAD_SKETCH = '''from rich.table import Table
from rich.text import Text

# ... existing code ...
    )
    table.add_row(
        "Twitter",
        # ... existing code ...
'''


def test_context_block_whose_last_lines_also_stand_further_on_abstains() -> None:
    # placed at the first ``)`` / ``add_row(`` the block changes nothing; with those two
    # lines read as the next row's, it deletes the "Coffee" row between
    result = apply_sketch(ROWS, ROWS_TAIL_SKETCH, path="rows.py")
    assert not result.applied
    assert "stand together further on" in result.reason


def test_context_block_whose_first_lines_also_stand_further_back_abstains() -> None:
    # the mirror image: ``)`` / ``add_row(`` read as the first row's close deletes the row
    result = apply_sketch(ROWS, ROWS_HEAD_SKETCH, path="rows.py")
    assert not result.applied
    assert "stand together further back" in result.reason


def test_context_block_of_closing_lines_is_still_placed() -> None:
    # a trailing run of trivial lines (``)``) repeats in every file: no second reading
    sketch = ROWS_TAIL_SKETCH.replace("    table.add_row(\n", "")
    result = apply_sketch(ROWS, sketch, path="rows.py")
    assert result.applied, result.reason
    assert result.merged == ROWS.replace("Table\n", "Table\nfrom rich.text import Text\n", 1)


# The global reading (``align``) has two optimal alignments: ``new_call()`` after the first
# ``total = f(x)`` and its blank line, or between the second and the third. The piecewise
# reading picks one; the sketch does not say which.
TWO_WAYS = "log(x)\n\nx = 1\ntotal = f(x)\n\ntotal = f(x)\ntotal = f(x)\npass\ny = 2\n"
TWO_WAYS_SKETCH = "# ...\ntotal = f(x)\n\nnew_call()\ntotal = f(x)\n# ...\n"


def test_global_reading_with_two_optimal_codes_abstains() -> None:
    result = apply_sketch(TWO_WAYS, TWO_WAYS_SKETCH, path="f.py")
    assert not result.applied
    assert result.reason == AMBIGUOUS


def test_global_reading_two_ways_in_blank_lines_only_does_not_overrule() -> None:
    # its two optimal alignments differ only in where a blank line goes: the piecewise
    # reading, with its finer blank-line rules, stands
    original = "y = 2\nreturn x\nz = f(x)\n\npass\nreturn x\n"
    sketch = "# ...\nz = f(x)\n\nnew_call()\n# ...\n"
    result = apply_sketch(original, sketch, path="f.py")
    assert result.applied
    assert result.merged == "y = 2\nreturn x\nz = f(x)\n\nnew_call()\n\npass\nreturn x\n"
