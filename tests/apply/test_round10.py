"""Issue 16, round 10: a block of context only whose first or last lines also stand
together a little further on (back) between the same anchors: read there, it is the
context around a deletion (a repeated row gone), not a block written for nothing; and an
import placed by similarity over one from the same module that binds other names, where
the file still uses the old names: it may go beside it; a block that moves a kept line
to another depth and whose other lines also fit elsewhere; a sketch with no first marker
that changes nothing unless it starts the file, below a docstring it does not show (or,
with no last marker, ends it above a definition)."""

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


IMPORTS = '''import sys

import pytest

import click.utils
from click._compat import WIN
from click._utils import UNSET


@pytest.mark.skipif(WIN, reason="Different behavior on windows.")
def test_echo():
    assert click.utils.echo is not UNSET
'''

NEW_IMPORT_SKETCH = '''# ... existing code ...
from click._compat import MAC
# ... existing code ...
'''


def test_import_over_one_whose_name_is_still_used_abstains() -> None:
    # placed by similarity, ``import MAC`` would replace ``import WIN``, which the file
    # still uses: it as likely goes beside it
    result = apply_sketch(IMPORTS, NEW_IMPORT_SKETCH, path="test_utils.py")
    assert not result.applied
    assert "still uses" in result.reason


def test_import_over_one_whose_name_goes_replaces_it() -> None:
    # the sketch also rewrites the one use of WIN: the import is a rewrite
    sketch = NEW_IMPORT_SKETCH + '''@pytest.mark.skipif(MAC, reason="Different behavior on windows.")
# ... existing code ...
'''
    result = apply_sketch(IMPORTS, sketch, path="test_utils.py")
    assert result.applied, result.reason
    assert result.merged == IMPORTS.replace("WIN", "MAC")


REGEX = '''import re

from rich.text import Text


def test_highlight_regex():
    text = Text("Ada Lovelace, Alan Turing")
    count = text.highlight_regex(
        r"(?P<yellow>[A-Za-z]+)[ ]+(?P<red>[A-Za-z]+)"
    )
    assert count == 2


def test_highlight_regex_compiled():
    text = Text("Ada Lovelace, Alan Turing")
    count = text.highlight_regex(
        re.compile(r"(?P<yellow>[A-Za-z]+)[ ]+(?P<red>[A-Za-z]+)")
    )
    assert count == 2
'''

REGEX_SKETCH = '''import re
# ... existing code ...
    text = Text("Ada Lovelace, Alan Turing")
    count = text.highlight_regex(
        re.compile(
            r"(?P<yellow>[A-Za-z]+)[ ]+(?P<red>[A-Za-z]+)"
        )
    )
    assert count == 2
# ... existing code ...
'''


def test_block_that_wraps_a_kept_line_and_also_fits_elsewhere_abstains() -> None:
    # in the first test the block wraps the pattern line in a new ``re.compile(``; in the
    # second, whose other lines are the same, it splits ``re.compile(r"...")`` over lines
    result = apply_sketch(REGEX, REGEX_SKETCH, path="test_text.py")
    assert not result.applied
    assert "also fits elsewhere" in result.reason


def test_block_that_wraps_a_kept_line_in_one_place_is_applied() -> None:
    # with the second test gone, the block fits once: the wrap is the edit
    original = REGEX.split("\n\n\ndef test_highlight_regex_compiled")[0] + "\n"
    result = apply_sketch(original, REGEX_SKETCH, path="test_text.py")
    assert result.applied, result.reason
    assert 're.compile(\n            r"(?P<yellow>' in result.merged


VIEWS = '''"""
    tests.views
    ~~~~~~~~~~~

    Pluggable views.
"""
import pytest

import flask.views


def test_basic_view(app):
    class Index(flask.views.View):
        methods = ["GET", "POST"]
'''


def test_sketch_that_starts_below_the_docstring_and_changes_nothing_else_deletes_it() -> None:
    # with the docstring above it kept, the sketch changes nothing, and nobody sends such
    # a sketch: with no first marker it starts the file
    result = apply_sketch(VIEWS, "import pytest\n# ... existing code ...\n", path="test_views.py")
    assert result.applied, result.reason
    assert result.merged == VIEWS.split('"""\n', 2)[2]


def test_sketch_that_starts_below_code_and_changes_nothing_still_abstains() -> None:
    # above the sketch's first line is code, not the file's head: nothing to read
    original = "x = 1\n" + VIEWS.split('"""\n', 2)[2]
    result = apply_sketch(original, "import pytest\n# ... existing code ...\n", path="t.py")
    assert not result.applied


BLUEPRINT = '''class Blueprint:
    def errorhandler(self, code):
        def decorator(f):
            return f
        return decorator

    def register_error_handler(self, code, f):
        self.handlers[code] = f
'''

BLUEPRINT_SKETCH = '''# ... existing code ...
    def errorhandler(self, code):
        # ... existing code ...
        return decorator
'''


def test_sketch_that_ends_above_a_definition_and_changes_nothing_else_deletes_it() -> None:
    # with the method below it kept, the sketch changes nothing; with no last marker it
    # ends the file
    result = apply_sketch(BLUEPRINT, BLUEPRINT_SKETCH, path="blueprints.py")
    assert result.applied, result.reason
    assert result.merged == BLUEPRINT.split("\n\n")[0] + "\n"
