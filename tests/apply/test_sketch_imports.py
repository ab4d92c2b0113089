"""Imports in a sketch (the applier, issue 36: tests by kind of sketch; first written as
issue 16's rounds 10 and 11). An import placed by similarity over one from the same module
that binds other names replaces it only when the file no longer uses the old names; a new
import under the file's import list of the same module abstains."""

from __future__ import annotations

from specialists.apply import apply_sketch


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
import h2.events

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
