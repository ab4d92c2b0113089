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
