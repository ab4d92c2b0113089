"""What a sketch means by its blank lines (the applier, issue 36: tests by kind of sketch;
first written as issue 16's rounds 8, 9, 11 and 12). A blank line it closes up under a
definition header is deleted, one dropped elsewhere is kept (writers drop blank lines); a
block that would change nothing but for a blank run it writes shorter means that run, one
with another change keeps it; new code glued to the line above (below) a run of blank
lines goes right there and keeps the run on its other side; a remove comment alone
between markers takes the shorter of the blank runs around the lines it quotes."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.result import ApplyOptions


ENV = '''import os

import click


class Environment(object):

    def __init__(self):
        self.verbose = False
        self.home = os.getcwd()

    def log(self, msg):
        click.echo(msg)
'''

ENV_SKETCH = '''# ... existing code ...
class Environment(object):
    def __init__(self):
        self.verbose = False
        self.home = os.getcwd()
        self.quiet = False
    # ... existing code ...
'''


def test_blank_line_under_a_definition_header_closed_up_is_deleted() -> None:
    # the sketch writes the body right under the header, where the file has a blank line:
    # a formatter's edit (black deletes it), not a blank line the writer dropped
    result = apply_sketch(ENV, ENV_SKETCH, path="complex.py")
    assert result.applied, result.reason
    assert result.merged == ENV.replace("(object):\n\n", "(object):\n").replace(
        "os.getcwd()\n", "os.getcwd()\n        self.quiet = False\n")
    assert result.confidence == 1.0


def test_blank_line_dropped_elsewhere_is_still_kept() -> None:
    # between two statements of a body the blank line stays a dropped line (a guess)
    original = ENV.replace("        self.home", "\n        self.home")
    sketch = ENV_SKETCH.replace("class Environment(object):\n", "")
    result = apply_sketch(original, sketch, path="complex.py")
    assert result.applied, result.reason
    assert "self.verbose = False\n\n        self.home" in result.merged
    assert result.confidence == 0.9


COLUMNS = '''import json
from urllib.request import urlopen


from rich import print
from rich.panel import Panel


def get_content(user):
    country = user["location"]["country"]
    return country
'''

COLUMNS_SKETCH = '''# ...
from urllib.request import urlopen

from rich import print
# ... existing code ...
def get_content(user):
    """Extract text from user dict."""
    country = user["location"]["country"]
    # ... existing code ...
'''


def test_block_that_changes_only_a_blank_run_means_it() -> None:
    # the first block is context only but for one of the two blank lines between the
    # imports: a block is written for a change, so that blank line is deleted
    result = apply_sketch(COLUMNS, COLUMNS_SKETCH, path="columns.py")
    assert result.applied, result.reason
    assert result.merged == COLUMNS.replace("urlopen\n\n\n", "urlopen\n\n").replace(
        "(user):\n", '(user):\n    """Extract text from user dict."""\n')


def test_blank_run_in_a_block_with_another_change_is_still_kept() -> None:
    # the same block with a new import in it: the shorter blank run is a dropped line
    sketch = COLUMNS_SKETCH.replace("from rich import print\n",
                                    "from rich import print\nfrom rich.columns import Columns\n")
    result = apply_sketch(COLUMNS, sketch, path="columns.py")
    assert result.applied, result.reason
    assert "urlopen\n\n\nfrom rich import print\nfrom rich.columns import Columns\n" in result.merged
    assert result.confidence == 0.9


IMPORTS = '''"""Validators."""

from ._make import attrib, attrs


__all__ = [
    "and_",
]
'''

GLUED_SKETCH = '''# ... keep existing code ...
from ._make import attrib, attrs
from .exceptions import NotCallableError

__all__ = [
    # ... keep existing code ...
'''


def test_insertion_glued_above_keeps_the_blank_run_below() -> None:
    # the sketch wrote one blank line where the file has two: a dropped blank line, kept
    result = apply_sketch(IMPORTS, GLUED_SKETCH, path="validators.py")
    assert result.applied
    assert result.merged == IMPORTS.replace(
        "attrs\n", "attrs\nfrom .exceptions import NotCallableError\n")


GLUED_BELOW_SKETCH = '''# ... keep existing code ...
from ._make import attrib, attrs

from .exceptions import NotCallableError
__all__ = [
    # ... keep existing code ...
'''


def test_insertion_glued_below_keeps_the_blank_run_above() -> None:
    # the piecewise reading (the global one reads this sketch otherwise: it abstains)
    result = apply_sketch(IMPORTS, GLUED_BELOW_SKETCH, path="validators.py",
                          options=ApplyOptions(cross_check=False))
    assert result.applied
    assert result.merged == IMPORTS.replace(
        "\n__all__", "\nfrom .exceptions import NotCallableError\n__all__")


def test_insertion_with_blank_lines_on_both_sides_is_read_as_written() -> None:
    # a blank line each side of the new line: the sketch splits the run, as written
    sketch = GLUED_SKETCH.replace("attrs\nfrom", "attrs\n\nfrom")
    result = apply_sketch(IMPORTS, sketch, path="validators.py")
    assert result.applied
    assert result.merged == IMPORTS.replace(
        "attrs\n\n\n", "attrs\n\nfrom .exceptions import NotCallableError\n\n")


# The global reading (``align``) has two optimal alignments: ``new_call()`` after the first


UTILS = '''from ._compat import WIN
from .globals import resolve_color_default

echo_native_types = (str, bytes)


def _posixify(name):
    return name


def echo(message):
    if message is not None and not isinstance(message, echo_native_types):
        message = str(message)
    return message
'''

UTILS_SKETCH = '''# ...
from .globals import resolve_color_default

# ... code remains the same
    if message is not None and not isinstance(message, (str, bytes)):
        message = str(message)
# ...
'''


def test_block_that_changes_nothing_with_a_blank_line_at_its_marker_abstains() -> None:
    # the import and a blank line: matched to the blank line under the import, the block
    # changes nothing; matched to the blank line under ``echo_native_types``, it deletes it
    result = apply_sketch(UTILS, UTILS_SKETCH, path="utils.py")
    assert not result.applied
    assert "blank line" in result.reason


def test_block_whose_change_is_a_shorter_blank_run_still_applies() -> None:
    original = "from threading import local\n\n\n_local = local()\n\n\ndef f():\n    pass\n"
    sketch = "from threading import local\n\n_local = local()\n\n# ... unchanged ...\n"
    result = apply_sketch(original, sketch, path="globals.py")
    assert result.applied
    assert result.merged == original.replace("local\n\n\n_local", "local\n\n_local")


def test_block_at_the_file_end_that_deletes_its_last_blank_line_still_applies() -> None:
    original = ("import console\n\n\ndef render():\n    try:\n        console.hide_cursor()\n"
                "        yield\n\n    finally:\n        console.show_cursor(True)\n\n")
    sketch = "# ... unchanged ...\n\n    finally:\n        console.show_cursor(True)\n"
    result = apply_sketch(original, sketch, path="live.py")
    assert result.applied
    assert result.merged == original[:-1]


BAR = '''class Bar:
    def __next__(self):
        return next(iter(self))

    # Python 2 compat
    next = __next__

    def is_fast(self):
        return True
'''


def test_quoted_removal_alone_takes_one_of_the_blank_runs_around_it() -> None:
    # deleted alone, the two lines would leave two blank lines where the file had one
    sketch = ("# ... existing code ...\n"
              "    # remove `# Python 2 compat` … `next = __next__`\n"
              "    # ... existing code ...\n")
    result = apply_sketch(BAR, sketch, path="bar.py")
    assert result.applied
    assert result.merged == BAR.replace("    # Python 2 compat\n    next = __next__\n\n", "")


def test_quoted_removal_beside_new_code_keeps_both_blank_runs() -> None:
    # the new line takes the removed lines' place: the blank lines around it stay
    sketch = ("# ... existing code ...\n"
              "    # remove `# Python 2 compat` … `next = __next__`\n"
              "    is_slow = False\n"
              "    # ... existing code ...\n")
    result = apply_sketch(BAR, sketch, path="bar.py")
    assert result.applied
    assert result.merged == BAR.replace("    # Python 2 compat\n    next = __next__\n",
                                        "    is_slow = False\n")
