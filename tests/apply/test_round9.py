"""Issue 16, round 9: a block of a sketch that would change nothing but for a blank run it
writes shorter means that blank run (the per-block form of reading a sketch literally when,
read with its blank runs kept, it changes nothing at all)."""

from __future__ import annotations

from specialists.apply import apply_sketch

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
