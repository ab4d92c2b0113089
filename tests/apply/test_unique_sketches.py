"""Unique sketches (every line next to a marker found once) whose text decides the merge,
which the applier used to abstain on (issue 16, round 7): a deletion inside a stretch the
sketch writes in full, new code that starts and ends with the same line as its neighbour,
an edge line read again as context, and readings that differ in trailing whitespace."""

from __future__ import annotations

from specialists.apply import apply_sketch

PAGER = '''import os

WIN = os.name == "nt"


def echo(text, color):
    if WIN:
        return _win_echo(text, color)
    return _echo(text, color)


def pager(text, color):
    stdout = get_stdout()
    if not isatty(stdout):
        return _nullpager(stdout, text, color)
    if "PAGER" in os.environ:
        if WIN:
            return _tempfilepager(text, os.environ["PAGER"], color)
        return _pipepager(text, os.environ["PAGER"], color)
    if os.environ.get("TERM") in ("dumb", "emacs"):
        return _nullpager(stdout, text, color)
    return _pipepager(text, "less", color)
'''

PAGER_SKETCH = '''# ... existing code ...
    if not isatty(stdout):
        return _nullpager(stdout, text, color)
    pager_cmd = (os.environ.get("PAGER", None) or "").strip()
    if pager_cmd:
        if WIN:
            return _tempfilepager(text, pager_cmd, color)
        return _pipepager(text, pager_cmd, color)
    if os.environ.get("TERM") in ("dumb", "emacs"):
# ... existing code ...
'''


def test_deletion_inside_a_stretch_between_pinned_lines_is_certain() -> None:
    # "if WIN:" below the deleted line is found twice in the file, so the lines right
    # around the deletion are not pinned; but the stretch, with no marker in it, runs
    # from a pinned line above to one below ("if os.environ.get(...)"), and the sketch
    # writes everything between them
    result = apply_sketch(PAGER, PAGER_SKETCH, path="pager.py")
    assert result.applied, result.reason
    expected = PAGER.replace(
        '    if "PAGER" in os.environ:\n',
        '    pager_cmd = (os.environ.get("PAGER", None) or "").strip()\n'
        '    if pager_cmd:\n').replace(
        'os.environ["PAGER"], color)', 'pager_cmd, color)')
    assert result.merged == expected


IMPORTS = '''import sys

from pkg._compat import PY2
from pkg._make import (
    Attribute,
    Factory,
    _AndValidator,
    _Attributes,
    _ClassBuilder,
    _CountingAttr,
    _transform_attrs,
    and_,
    fields,
    make_class,
    validate,
)
from pkg.exceptions import NotAnAttrsClassError, DefaultAlreadySetError

from .utils import (gen_attr_names, list_of_attrs, simple_attr,
                    simple_classes)

attrs_st = simple_attrs.map(lambda c: Attribute.from_counting_attr("name", c))


class TestCountingAttr(object):
    def test_make_0(self):
        cls = make_class(
            "C0", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"

    def test_make_1(self):
        cls = make_class(
            "C1", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"

    def test_make_2(self):
        cls = make_class(
            "C2", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"

    def test_make_3(self):
        cls = make_class(
            "C3", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"

    def test_make_4(self):
        cls = make_class(
            "C4", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"

    def test_make_5(self):
        cls = make_class(
            "C5", {"x": simple_attr("x")}
        )
        assert fields(cls).x.name == "x"
'''

IMPORTS_SKETCH = '''# ... existing code ...
from pkg._compat import PY2
from pkg._make import (
    Attribute, Factory, _AndValidator, _Attributes, _ClassBuilder,
    _CountingAttr, _transform_attrs, and_, fields, make_class, validate
)
from pkg.exceptions import DefaultAlreadySetError, NotAnAttrsClassError

from .utils import (
    gen_attr_names, list_of_attrs, simple_attr, simple_classes
)

attrs_st = simple_attrs.map(lambda c: Attribute.from_counting_attr("name", c))
# ... existing code ...
'''


def test_large_deletion_in_a_stretch_needs_three_pinned_lines() -> None:
    # eleven lines go between "from pkg._make import (" and ")" (found 7 times): two pinned
    # lines above the deletion and one below ("attrs_st = ...") bound the stretch
    result = apply_sketch(IMPORTS, IMPORTS_SKETCH, path="test_make.py")
    assert result.applied, result.reason
    tail = IMPORTS.split("attrs_st = ", 1)[1]
    shown = IMPORTS_SKETCH.split("\n", 1)[1].split("attrs_st = ", 1)[0]
    assert result.merged == "import sys\n\n" + shown + "attrs_st = " + tail
    # with only one pinned line above it (the marker right before "from pkg._make import
    # ("), the same large deletion is not certain
    weaker = IMPORTS_SKETCH.replace("from pkg._compat import PY2\n", "")
    assert not apply_sketch(IMPORTS, weaker, path="test_make.py").applied


HASHES = '''class TestDarkMagic(object):
    def test_hash_by_id(self):
        """
        Hashing by ID.
        """

        @attr.s(hash=False)
        class C(object):
            pass

        assert hash(C()) != hash(C())

    def test_overwrite_base(self):
        """
        Base classes can overwrite each other.
        """
        assert True
'''

HASHES_SKETCH = '''# ... existing code ...
        assert hash(C()) != hash(C())

    def test_eq_false(self):
        """
        eq=False makes a class hashable by ID.
        """

        @attr.s(eq=False)
        class C(object):
            pass

        assert hash(C()) != hash(C())

    def test_overwrite_base(self):
# ... existing code ...
'''


def test_new_test_ending_like_its_neighbour_is_inserted_after_the_shown_line() -> None:
    # the sketch's first line is the neighbour's last line, and the new test ends with the
    # same line and copies the neighbour's "class C(object): pass": the first reading
    # matched the copy and left the edge line new; pinned where the file has it once, the
    # edge line reads as context and the new test goes after it
    result = apply_sketch(HASHES, HASHES_SKETCH, path="test_dark_magic.py")
    assert result.applied, result.reason
    new_test = HASHES_SKETCH.split("\n", 2)[2].split("    def test_overwrite_base", 1)[0]
    at = HASHES.index("    def test_overwrite_base")
    assert result.merged == HASHES[:at] + new_test[1:] + HASHES[at:]


def test_new_block_starting_and_ending_with_the_edge_line_is_not_two_readings() -> None:
    original = '''def test_isolation():
    runner = CliRunner()
    with runner.isolation() as (_, err):
        click.echo("x", err=True)

    assert err.getvalue() == b"x"
'''
    sketch = '''# rest of code
    assert err.getvalue() == b"x"


def test_isolation_flushes():
    print("gyarados", file=sys.stderr, end="")

    assert err.getvalue() == b"x"
'''
    # matching the first or the last "assert" to the file's one writes the same lines
    result = apply_sketch(original, sketch, path="test_testing.py")
    assert result.applied, result.reason
    assert result.merged == original + sketch.split("\n", 2)[2]


def test_readings_differing_only_in_trailing_whitespace_take_the_lesser() -> None:
    original = '''class C:
    c = attr.ib(
        type=Dict[C, D],
        validator=attr.validators.deep_mapping(
            attr.validators.instance_of(C), attr.validators.instance_of(D)
        ),
    )
    e: str = attr.ib(validator=attr.validators.matches_re(re.compile(r"foo")))
'''
    # the sketch copies ")," with a trailing tab: one reading keeps it as the file's line,
    # the other writes it as a new line (the new block ends with "),"/")" too)
    sketch = '''# (unchanged)
            attr.validators.instance_of(C), attr.validators.instance_of(D)
        ),\t
    )
    d2 = attr.ib(
        type=Dict[C, D],
        validator=attr.validators.deep_mapping(
            value_validator=attr.validators.instance_of(C)
        ),
    )
    e: str = attr.ib(validator=attr.validators.matches_re(re.compile(r"foo")))
# (unchanged)
'''
    result = apply_sketch(original, sketch, path="typing_example.py")
    assert result.applied, result.reason
    new = '''    d2 = attr.ib(
        type=Dict[C, D],
        validator=attr.validators.deep_mapping(
            value_validator=attr.validators.instance_of(C)
        ),
    )
'''
    at = original.index("    e: str")
    assert result.merged == original[:at] + new + original[at:]
