"""Issue 16, round 10: a block of context only whose first or last lines also stand
together a little further on (back) between the same anchors: read there, it is the
context around a deletion (a repeated row gone), not a block written for nothing."""

from __future__ import annotations

from specialists.apply import apply_sketch

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
