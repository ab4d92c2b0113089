"""Issue 16, round 8: a sketch that closes up the blank line under a definition header
means it, and a sketch whose last (first) line is an original line moved to another depth,
with code beyond it and no marker, abstains."""

from __future__ import annotations

from specialists.apply import apply_sketch

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


DEFINE = '''def define(
    maybe_cls,
    order=None,
    on_setattr=None,
):
    """Define a class."""
    return attrs(
        maybe_cls,
        order=order,
        on_setattr=on_setattr,
    )


def frozen(
    maybe_cls,
    on_setattr=None,
    order=None,
):
    """Define a frozen class."""
    return define(
        maybe_cls,
        on_setattr=on_setattr,
        order=order,
    )
'''

# indented 2 deeper throughout (the marker too), every context line found twice in the file
DEFINE_SKETCH = '''  # ... keep define ...
      on_setattr=None,
      alias=None,
  ):
      # ... existing code ...
          on_setattr=on_setattr,
          alias=alias,
      )
  # ... code remains the same
'''


def test_shift_read_from_placed_lines_when_no_line_is_unique() -> None:
    result = apply_sketch(DEFINE, DEFINE_SKETCH, path="_next_gen.py")
    assert result.applied, result.reason
    assert result.merged == DEFINE.replace(
        "    on_setattr=None,\n):\n    \"\"\"Define a class.",
        "    on_setattr=None,\n    alias=None,\n):\n    \"\"\"Define a class.").replace(
        "        on_setattr=on_setattr,\n    )",
        "        on_setattr=on_setattr,\n        alias=alias,\n    )")


def test_global_reading_takes_the_shift_of_the_reading_it_checks() -> None:
    # the cross-check's global reading has no unique line either: with a shift of 0 it
    # would write every placed line 2 deeper, and the two readings would disagree
    from specialists.apply.merger import Merger
    from specialists.apply.result import ApplyOptions
    from specialists.apply.sketch_lines import SketchLines
    from specialists.apply.text import split_lines

    olines = split_lines(DEFINE)
    sk = SketchLines(split_lines(DEFINE_SKETCH), set(olines.keys), "python")
    first = Merger(olines, sk, "python", ApplyOptions())
    out, _ = first.assemble(first.anchor())
    assert first.shift == 2
    alt, _ = first.fork().merge_dp()
    assert alt == out
