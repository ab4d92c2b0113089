"""Issue 16, round 12: a remove comment alone between two markers, quoting lines with a
blank run on either side, takes the shorter run with it (the longer one stays, as it was);
and a block whose lines come out to a shallower depth from under a header it deletes
(``else:``) is not a block that only re-indents: the deletion is its change."""

from __future__ import annotations

from specialists.apply import apply_sketch

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
