"""The loop's tests reuse the Tab tests' toy data and tiny checkpoint (built in seconds)."""

from tests.tab.conftest import tiny_checkpoint, toy_data  # noqa: F401
