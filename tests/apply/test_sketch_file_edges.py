"""Sketches at the file's edges, with no first or last marker (the applier, issue 36: tests
by kind of sketch; first written as issue 16's rounds 8 and 10). A sketch that ends on an
original line moved to another depth with code beyond it abstains (at the file's end it
applies); one with no first marker that changes nothing unless it starts the file, below a
docstring it does not show, deletes that docstring (with no last marker: ends the file
above a definition); below code it still abstains. One that ends above a JavaScript
module's exports with no last marker abstains as above a definition."""

from __future__ import annotations

from specialists.apply import apply_sketch


TIMEOUTS = '''import pytest

from httpx import Client, PoolTimeout


async def test_pool_timeout(server, backend):
    async with Client(pool_limits=pool_limits, timeout=timeout) as client:
        response = await client.get(server.url, stream=True)

        with pytest.raises(PoolTimeout):
            await client.get("http://localhost:8000/")

        await response.read()
'''

TIMEOUTS_SKETCH = '''# ... existing code ...
async def test_pool_timeout(server, backend):
    async with Client(pool_limits=pool_limits, timeout=timeout) as client:
        async with client.stream("GET", server.url):
            with pytest.raises(PoolTimeout):
                await client.get("http://localhost:8000/")
'''


def test_sketch_ending_on_a_moved_line_with_code_beyond_abstains() -> None:
    # the last two lines moved into the new "async with" block: the sketch ends with new
    # code and no marker, and "await response.read()" lies beyond it: the sketch ends the
    # file there (the commit deleted it) or lost its marker
    result = apply_sketch(TIMEOUTS, TIMEOUTS_SKETCH, path="test_timeouts.py")
    assert not result.applied
    assert "moved to another indentation" in (result.reason or "")


def test_sketch_ending_on_a_moved_line_at_the_file_end_applies() -> None:
    original = TIMEOUTS.replace("\n        await response.read()\n", "")
    result = apply_sketch(original, TIMEOUTS_SKETCH, path="test_timeouts.py")
    assert result.applied, result.reason
    assert result.merged.endswith('                await client.get("http://localhost:8000/")\n')
    assert "response" not in result.merged


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


OPTION = '''const { InvalidArgumentError } = require('./error.js');

class Option {
  constructor(flags) {
    this.flags = flags;
    this.hidden = false;
  }
}

function splitOptionFlags(flags) {
  const parts = flags.split(/[ |,]+/);
  return { shortFlag: parts[0], longFlag: parts[1] };
}

exports.Option = Option;
exports.splitOptionFlags = splitOptionFlags;
'''

OPTION_SKETCH = '''// ... existing code ...
function splitOptionFlags(flags) {
  const parts = flags.split(/[ ,|]+/);
  return { shortFlag: parts[0], longFlag: parts[1] };
}
'''


def test_a_sketch_ending_above_the_exports_with_no_marker_abstains() -> None:
    # it ends the file (the exports go, as a frontier model means) or forgot its last
    # marker (they stay): the sketch does not say, as above a definition
    result = apply_sketch(OPTION, OPTION_SKETCH, language="javascript", path="lib/option.js")
    assert result.status == "abstained"
    assert result.reason.startswith("the sketch ends with no marker above definitions")


def test_the_same_sketch_with_its_last_marker_keeps_the_exports() -> None:
    sketch = OPTION_SKETCH + "// ... existing code ...\n"
    result = apply_sketch(OPTION, sketch, language="javascript", path="lib/option.js")
    assert result.status == "applied", result.reason
    assert result.merged == OPTION.replace("/[ |,]+/", "/[ ,|]+/")
