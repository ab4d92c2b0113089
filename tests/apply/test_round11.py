"""Issue 16, round 11: general readings rather than single-commit shapes. New code written
into a run of blank lines only, glued to the line above it and followed by a shorter
blank run, goes right under that line and keeps the original blank run below it; and a
sketch whose global reading has two optimal alignments that write different code
abstains (the sketch reads two ways), where one that differs in blank lines only does
not overrule the piecewise reading; and a block that changes nothing where it is placed,
with a blank line next to a marker, abstains (matched to a later blank line it would
delete the lines between); a new import under the file's import list of the same module
abstains (the list counts as one line, as it does above the new import)."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.merger import AMBIGUOUS
from specialists.apply.result import ApplyOptions

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


MOCKS = '''import ssl
import typing

import h2.connection
import h2.events

from httpx import (
    AsyncioBackend,
    BaseReader,
    BaseWriter,
    Protocol,
    Request,
)


class MockBackend(AsyncioBackend):
    def __init__(self, app):
        self.app = app

    async def connect(
        self,
        hostname: str,
    ) -> typing.Tuple[BaseReader, BaseWriter, Protocol]:
        self.server = MockServer(self.app)
        return self.server, self.server, Protocol.HTTP_2


class MockServer:
    pass
'''

MOCKS_SKETCH = '''# ... rest of code ...

from httpx import AsyncioBackend, BaseReader, BaseWriter, Request

# ... existing code ...
        hostname: str,
    ) -> typing.Tuple[BaseReader, BaseWriter, str]:
        self.server = MockServer(self.app)
        return self.server, self.server, "HTTP/2"

# ... keep existing code ...
'''


def test_new_import_under_the_files_import_list_of_the_same_module_abstains() -> None:
    # the one-line import rewrites the list above it, or adds a second import under it:
    # the list counts as one line, so the two are next to each other
    result = apply_sketch(MOCKS, MOCKS_SKETCH, path="utils.py")
    assert not result.applied
    assert "new import of 'httpx'" in result.reason
