"""Issue 16, round 11: general readings rather than single-commit shapes. New code written
into a run of blank lines only, glued to the line above it and followed by a shorter
blank run, goes right under that line and keeps the original blank run below it."""

from __future__ import annotations

from specialists.apply import apply_sketch
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
