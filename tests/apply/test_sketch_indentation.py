"""Indentation in a sketch (the applier, issue 36: tests by kind of sketch; first written
as issue 16's rounds 8, 10 and 12). With no unique line, the shift is read from the lines
placed, and the global reading takes the shift of the reading it checks; a block that moves
a kept line to another depth and whose other lines also fit elsewhere abstains; a block
whose lines come out shallower from under a header it deletes changes by that deletion."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.result import ApplyOptions


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


WRAP = '''def attrs(maybe_cls=None):
    def wrap(cls):
        return cls

    # if it's used as `@attrs` but ``None`` if used as `@attrs()`.
    if maybe_cls is None:
        return wrap
    else:
        return wrap(maybe_cls)


mutable = attrs
'''


def test_dedent_under_a_deleted_header_is_the_blocks_change() -> None:
    # `else:` deleted by context and its body moved out: not a block that only re-indents
    sketch = ('# ... existing code ...\n'
              '    if maybe_cls is None:\n'
              '        return wrap\n'
              '\n'
              '    return wrap(maybe_cls)\n'
              '\n'
              '\n'
              'mutable = attrs\n')
    result = apply_sketch(WRAP, sketch, path="next_gen.py")
    assert result.applied, result.reason
    assert result.merged == WRAP.replace("    else:\n        return wrap(maybe_cls)\n",
                                         "\n    return wrap(maybe_cls)\n")


def test_dedent_with_no_header_deleted_still_abstains() -> None:
    sketch = ('# ... existing code ...\n'
              '    if maybe_cls is None:\n'
              '        return wrap\n'
              '    return wrap(maybe_cls)\n'
              '# ... existing code ...\n')
    original = WRAP.replace("    else:\n", "")
    result = apply_sketch(original, sketch, path="next_gen.py")
    assert not result.applied
