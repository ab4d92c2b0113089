"""A deletion beside a line that only closes brackets, in a brace language (the applier,
issue 36: tests by kind of sketch). ``}`` and ``});`` repeat all through a JavaScript or Go
file, so they are rarely pinned by themselves, and a sketch that rewrites the last lines of
a block used to be refused as deleting lines between two lines not certainly placed. Such a
line is now placed as certainly as the line it balances, or, below a certain line, as the
end of the block that line stands in, where the sketch and the original agree on the
brackets (``deletions._bracket_pinned``, ``deletions._same_block``). Where they disagree, or
the sketch's block copies one the original has, the applier still abstains."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specialists.apply import apply_sketch, gap_search
from specialists.apply.languages import bracket_steps, closing_line
from specialists.apply.result import ApplyOptions

UNCERTAIN = "the sketch deletes original lines between two lines that are not certainly placed"

LOOP = '''function drain(queue, args) {
    var q = queue.slice();
    for (var i = 0; i < q.length; i++) {
        q[i].apply(null, args);
    }
    return q.length;
}

function other(list) {
    for (var i = 0; i < list.length; i++) {
        list[i]();
    }
}
'''

# The new line is nothing like the one it replaces, and ``}`` is one of three: the loop
# header pins it, as the line balancing its bracket.
LOOP_SKETCH = '''    // ... existing code ...
    var q = queue.slice();
    for (var i = 0; i < q.length; i++) {
        notify(q[i], args);
    }
    // ... existing code ...
'''

METHOD = '''class Option {
  parse(value, previous) {
    if (previous === undefined) {
      return [value];
    }

    return previous.concat(value);
  }

  name() {
    return this.long;
  }
}
'''

# The method's last lines rewritten: the ``}`` below them closes the block the pinned ``}``
# above them stands in, in the sketch and in the original alike.
METHOD_SKETCH = '''    // ... existing code ...
    if (previous === undefined) {
      return [value];
    }

    previous.push(value);
    return previous;
  }
  // ... existing code ...
'''

NESTED = '''function drain(queue, args) {
    var q = queue.slice();
    for (var i = 0; i < q.length; i++) {
        if (q[i]) {
            q[i].apply(null, args);
        }
    }
    return q.length;
}
'''

# By its brackets the sketch's ``}`` closes the loop; by its place it would be the ``if``'s.
DISAGREES = '''    // ... existing code ...
    var q = queue.slice();
    for (var i = 0; i < q.length; i++) {
        notify(q[i], args);
        }
    // ... existing code ...
'''

TESTS = '''test('one', async t => {
  const app = build({
    options: {
      fallback: function () {
        t.fail('no')
      },
      onBad: function (res) {
        res.end('bad')
      }
    }
  })
  t.ok(app)
})

test('three', async t => {
  t.ok(true)
})
'''

# A new test that copies most of an existing one: read as a rewrite of ``one`` it would
# delete its ``fallback``; the applier must not answer that.
COPY = '''// ... existing code ...

test('two', async t => {
  const app = build({
    options: {
      onBad: function (res) {
        res.end('bad')
      }
    }
  })
  t.ok(app)
})

test('three', async t => {
// ... existing code ...
'''


SCRIPT = '''function setup(app) {
  app.use(logger)
}

function teardown(app) {
  app.close()
}

app.listen(3000)
console.log('listening')
start(app)
'''

# The ``}`` right below the marker is one of two, with its opener out of sight; the lines
# between it and ``start(app)`` are plain statements, rewritten.
STATEMENTS = '''// ... existing code ...
}

server.close()
report()
start(app)
'''

# The same sketch where the deleted lines are one call over two lines: they open and close
# brackets, so they may be a block's edge, and the closing line is not certain.
CALL = SCRIPT.replace("app.listen(3000)\nconsole.log('listening')",
                      "app.listen(3000, {\n  host: 'localhost' })")


@pytest.mark.parametrize(("key", "steps"), [
    ("}", (-1, -1)), ("});", (-2, -2)), ("} else {", (-1, 0)), ("foo({", (0, 2)),
    ("if (a) {", (0, 1)), ('x = "}"; // }', (0, 0)), ("s = `a{`", (0, 0)),
    ("* {@link Foo}", (0, 0)), ("/* } */", (0, 0)), ("return;", (0, 0)),
])
def test_bracket_steps_skip_strings_and_comments(key: str, steps: tuple[int, int]) -> None:
    assert bracket_steps(key) == steps


def test_closing_line_finds_the_balancing_line_either_way() -> None:
    keys = ["for (a) {", "x();", "if (b) {", "y();", "}", "}", "z();"]
    assert closing_line(keys, 1, len(keys), 1) == 5  # the loop's ``}``
    assert closing_line(keys, 3, len(keys), 1) == 4  # the ``if``'s
    assert closing_line(keys, 4, -1, -1) == 0  # up from the ``if``'s ``}``: the loop opens
    assert closing_line(keys, 6, -1, -1) is None
    assert closing_line(keys, 1, 4, 1) is None  # stops before the line asked to stop at


@pytest.mark.parametrize(("original", "sketch", "want"), [
    (LOOP, LOOP_SKETCH, LOOP.replace("q[i].apply(null, args);", "notify(q[i], args);")),
    (METHOD, METHOD_SKETCH, METHOD.replace(
        "    return previous.concat(value);", "    previous.push(value);\n    return previous;")),
])
def test_a_closing_line_is_placed_by_its_brackets(original: str, sketch: str,
                                                  want: str) -> None:
    result = apply_sketch(original, sketch, language="javascript", path="lib/a.js")
    assert result.applied, result.reason
    assert result.merged == want


def test_the_same_sketch_in_python_has_no_brackets_to_go_by() -> None:
    # The rule is for brace languages only; the language named decides. The new line is
    # unlike the one it replaces, so it does not read as that line rewritten either
    # (``deletions._lines_rewritten``, which answers the sketch above in Python too).
    sketch = LOOP_SKETCH.replace("notify(q[i], args);", "stopped = true;")
    assert apply_sketch(LOOP, sketch, language="javascript", path="lib/a.js").applied
    result = apply_sketch(LOOP, sketch, language="python", path="lib/a.py")
    assert not result.applied
    assert result.reason == UNCERTAIN


def test_brackets_that_disagree_with_the_place_still_abstain() -> None:
    result = apply_sketch(NESTED, DISAGREES, language="javascript", path="lib/a.js")
    assert not result.applied
    assert result.reason == UNCERTAIN


def test_a_block_copying_another_is_not_read_as_rewriting_it() -> None:
    result = apply_sketch(TESTS, COPY, language="javascript", path="test/a.test.js")
    assert not result.applied or result.merged == TESTS.replace(
        "test('three'", COPY.split("\n", 2)[2].split("test('three'")[0] + "test('three'")


def test_plain_statements_rewritten_below_a_closing_line() -> None:
    result = apply_sketch(SCRIPT, STATEMENTS, language="javascript", path="lib/a.js")
    assert result.applied, result.reason
    assert result.merged == SCRIPT.replace("app.listen(3000)\nconsole.log('listening')",
                                           "server.close()\nreport()")


def test_deleted_lines_that_open_brackets_keep_the_closing_line_uncertain() -> None:
    result = apply_sketch(CALL, STATEMENTS, language="javascript", path="lib/a.js")
    assert not result.applied
    assert result.reason == UNCERTAIN


class _Sketch:
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def sep_between(self, ja: int, jb: int) -> bool:
        return False


def _reading(sketch: list[str], original: list[str], language: str) -> SimpleNamespace:
    return SimpleNamespace(language=language, sk=_Sketch(sketch), ok=original, m=len(sketch),
                           n=len(original), options=ApplyOptions())


# A block whose ``}`` fits two of the original's equally well (``gap_search.break_tie``):
# only at the first do the lines before it leave one bracket open, as the sketch's do.
TIE_SKETCH = ["A", "if (x) {", "go();", "}", "B"]
TIE_ORIGINAL = ["A", "if (y) {", "stop();", "}", "items.forEach((i) => {", "if (i) {",
                "use(i);", "}", "});", "B"]


def test_a_tie_goes_to_the_placement_whose_brackets_agree_with_the_sketch() -> None:
    early, late = [(3, 3)], [(3, 7)]
    reading = _reading(TIE_SKETCH, TIE_ORIGINAL, "javascript")
    assert gap_search._bracket_mismatches(reading, early, 0, 0, 4, 9) == 0
    assert gap_search._bracket_mismatches(reading, late, 0, 0, 4, 9) == 2
    assert gap_search.break_tie(reading, early, late, 0, 0, 4, 9) == early
    assert gap_search.break_tie(reading, late, early, 0, 0, 4, 9) == early


def test_a_tie_the_brackets_leave_open_or_in_python_still_abstains() -> None:
    reading = _reading(TIE_SKETCH, TIE_ORIGINAL, "javascript")
    assert gap_search.break_tie(reading, [(3, 3)], [(3, 3)], 0, 0, 4, 9) is None
    python = _reading(TIE_SKETCH, TIE_ORIGINAL, "python")
    assert gap_search.break_tie(python, [(3, 3)], [(3, 7)], 0, 0, 4, 9) is None
