"""Sketches in the styles frontier models write (issue 16): marker spellings, file edges
read as the file's start and end, deletions by omission, trailing whitespace."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.checks import check_parse
from specialists.apply.markers import LineKind, classify
from specialists.apply.result import Abstain

PY = '''import os
import sys


def load(path):
    with open(path) as handle:
        return handle.read()


def save(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def main():
    print(load(sys.argv[1]))
'''

GO = '''package main

import "fmt"

func add(a, b int) int {
\treturn a + b
}

func main() {
\tfmt.Println(add(1, 2))
}
'''


def _merged(original: str, sketch: str, path: str) -> str:
    result = apply_sketch(original, sketch, path=path)
    assert result.applied, result.reason
    assert result.merged is not None
    return result.merged


def test_parenthesised_and_bare_markers_are_markers() -> None:
    for line in ("# (unchanged)", "// (rest of file unchanged)", "# (existing code)"):
        assert classify(line)[0] == LineKind.MARKER, line
    assert classify("# (see above)")[0] == LineKind.CODE
    # a bare ellipsis is Python's Ellipsis, and a marker in a brace language
    assert classify("...", "python")[0] == LineKind.CODE
    assert classify("...", "go")[0] == LineKind.MARKER


def test_unchanged_in_parentheses_keeps_the_code() -> None:
    sketch = '''# (unchanged)
def save(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
# (unchanged)
'''
    assert _merged(PY, sketch, "a.py") == PY.replace('open(path, "w")',
                                                     'open(path, "w", encoding="utf-8")')


def test_bare_ellipsis_marker_in_go() -> None:
    sketch = '''...
func add(a, b int) int {
\treturn a + b + 0
}
...
'''
    assert _merged(GO, sketch, "main.go") == GO.replace("a + b\n", "a + b + 0\n")


def test_trailing_whitespace_added_to_a_context_line_is_dropped() -> None:
    sketch = '''# ... existing code ...
def save(path, text):   
    with open(path, "w") as handle:
        handle.write(text.strip())
# ... existing code ...
'''
    assert _merged(PY, sketch, "a.py") == PY.replace("handle.write(text)",
                                                     "handle.write(text.strip())")


def test_marker_at_the_header_level_right_after_a_header_stands_for_its_body() -> None:
    original = PY + '''

class Store:
    """Keeps things."""

    def get(self, key):
        return self.items[key]

    def put(self, key, value):
        self.items[key] = value
'''
    sketch = '''# ... existing code ...
def main():
    print(load(sys.argv[1]), file=sys.stderr)


class Store:
# ... existing code ...
'''
    expected = original.replace("print(load(sys.argv[1]))",
                                "print(load(sys.argv[1]), file=sys.stderr)")
    result = apply_sketch(original, sketch, path="a.py")
    # never the class's body deleted; abstaining over the marker's indentation is fine
    assert not result.applied or result.merged == expected, result.merged


def test_sketch_opening_with_imports_below_unshown_imports_abstains() -> None:
    # no leading marker: the sketch may start the file (import os deleted) or have lost
    # its marker (import os kept); the sketch does not say which
    sketch = '''import sys
import json


def load(path):
# ... existing code ...
'''
    result = apply_sketch(PY, sketch, path="a.py")
    assert not result.applied
    assert "import" in (result.reason or "")


def test_sketch_that_starts_the_file_with_its_first_line_applies() -> None:
    sketch = '''import os
import sys
import json
# ... existing code ...
'''
    assert _merged(PY, sketch, "a.py") == PY.replace("import sys\n", "import sys\nimport json\n")


def test_sketch_ending_a_definition_above_unshown_definitions_abstains() -> None:
    # no trailing marker after the end of save(): main() deleted, or a marker forgotten
    sketch = '''# ... existing code ...
def save(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
'''
    result = apply_sketch(PY, sketch, path="a.py")
    assert not result.applied
    assert "ends with no marker" in (result.reason or "")


def test_sketch_ending_with_new_code_above_more_code_and_no_marker_abstains() -> None:
    # the file's last lines rewritten (main() deleted), or new lines inserted after save()
    # with the trailing marker lost: the sketch does not say which
    sketch = '''import os
import sys


def save(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    print("saved", path)
'''
    result = apply_sketch(PY, sketch, path="a.py")
    assert not result.applied
    assert "ends with new code and no marker" in (result.reason or "")
    # the same shape at the start: new first lines, no marker, code above the first anchor
    start = '''import logging
def main():
    print(load(sys.argv[1]))
'''
    result = apply_sketch(PY, start, path="a.py")
    assert not result.applied
    assert "starts with new code and no marker" in (result.reason or "")
    # a new line at the edge with only blank lines beyond it still writes the file's end
    end = '''# ... existing code ...
def main():
    print(load(sys.argv[1]))
    return 0
'''
    assert _merged(PY, end, "a.py") == PY + "    return 0\n"


def test_forgotten_leading_marker_above_code_keeps_the_code() -> None:
    sketch = '''def save(path, text):
    with open(path, "w") as handle:
        handle.write(text)
        handle.flush()


def main():
    # ... existing code ...
'''
    assert _merged(PY, sketch, "a.py") == PY.replace(
        "        handle.write(text)\n", "        handle.write(text)\n        handle.flush()\n")


CONFIG = '''"""Configuration."""

import os
import errno

from werkzeug.utils import import_string
from ._compat import string_types


class Config(dict):
    def from_object(self, obj):
        for key in dir(obj):
            if key.isupper():
                self[key] = getattr(obj, key)
'''


def test_new_import_with_no_context_is_not_placed_over_another_module() -> None:
    # "from . import json" resembles "from ._compat import string_types": rewrite or new
    # line beside it? The sketch shows no context to say.
    sketch = '''# ... existing code ...
from . import json
# ... existing code ...
            if key.isupper() and not key.startswith("_"):
# ... existing code ...
'''
    result = apply_sketch(CONFIG, sketch, path="config.py")
    assert not result.applied
    assert "import" in (result.reason or "")


def test_import_of_the_same_names_from_another_module_is_a_rewrite() -> None:
    sketch = '''# ... existing code ...
from ._compat import text_type
# ... existing code ...
from ._compat import string_types
# ... existing code ...
'''
    # text_type binds another name: abstain; the same names from a renamed module apply
    assert not apply_sketch(CONFIG, sketch, path="config.py").applied
    renamed = '''# ... existing code ...
from .compat import string_types
# ... existing code ...
            if key.isupper() and key:
# ... existing code ...
'''
    assert _merged(CONFIG, renamed, "config.py") == CONFIG.replace(
        "from ._compat", "from .compat").replace("key.isupper():", "key.isupper() and key:")


def test_shallow_marker_after_an_unchanged_body_prefix_keeps_the_body() -> None:
    sketch = '''import os
import errno
import json
# ... existing code ...
class Config(dict):
    def from_object(self, obj):
# ... existing code ...
'''
    result = apply_sketch(CONFIG, sketch, path="config.py")
    # the marker's indentation is off; its body must not be read as deleted
    assert not result.applied or result.merged == CONFIG.replace(
        "import errno\n", "import errno\nimport json\n"), result.merged


def _parse_abstains(original: list[str], origin: list[int], new: dict[int, str],
                    language: str) -> str | None:
    """check_parse on a merge given by where each line came from (-1 with ``new`` text)."""
    out = [new[k] if o < 0 else original[o] for k, o in enumerate(origin)]
    try:
        check_parse(original, out, origin, language)
    except Abstain as exc:
        return exc.reason
    return None


def test_parse_check_sees_lines_deleted_at_the_file_end() -> None:
    go = GO.rstrip("\n").split("\n")
    origin = list(range(len(go) - 1))  # the closing brace of main() lost
    reason = _parse_abstains(go, origin, {}, "go")
    assert reason is not None and "parse" in reason
    assert _parse_abstains(go, list(range(len(go))), {}, "go") is None


def test_parse_check_compares_whole_files_when_the_window_cannot_parse_alone() -> None:
    # the window around the edit starts inside a template string (a line at column 0),
    # so neither side's window parses alone: the whole files decide
    js = ["const doc = `", "hello", "world", "`;", "", "function f() {", "  return doc;", "}"]
    origin = [0, 1, 2, -1, 4, 5, 6, 7]
    reason = _parse_abstains(js, origin, {3: "`;("}, "javascript")
    assert reason is not None and "file parsed before" in reason
    assert _parse_abstains(js, origin, {3: "`; // done"}, "javascript") is None


FUNCS = '''def z(x):
    print(x)
    return None


def a(x):
    if x:
        return 1
    return None


def b(x):
    print(x)
    return x


def c(x):
    return x * 2
'''


def test_definition_deleted_by_omission_between_closed_up_neighbours() -> None:
    # "return None" ends z() and a(): not a pinned line, but the lines the sketch leaves
    # out between it and the unique "def c(x):" are exactly one whole definition
    sketch = '''# ... existing code ...
    return None


def c(x):
    return x * 3
'''
    expected = FUNCS.replace('''def b(x):
    print(x)
    return x


''', "").replace("x * 2", "x * 3")
    assert _merged(FUNCS, sketch, "f.py") == expected


def test_partial_definition_left_out_between_closed_up_lines_abstains() -> None:
    # what the sketch leaves out is b()'s header and first line only: not a whole
    # definition, and "return None" is not pinned
    sketch = '''# ... existing code ...
    return None
    return x


def c(x):
    return x * 3
'''
    assert not apply_sketch(FUNCS, sketch, path="f.py").applied


def test_line_deleted_below_the_only_place_its_upper_neighbour_can_go() -> None:
    original = '''"""Commonly useful filters
for attrs.
"""

from __future__ import absolute_import

from ._compat import isclass


def include(*what):
    """
    Include.
    """
    return what
'''
    # '"""' occurs three times, but once above the pinned import: the lines between that
    # one and the import are what the sketch deletes
    sketch = '''# ... existing code ...
"""

from ._compat import isclass
# ... existing code ...
'''
    assert _merged(original, sketch, "filters.py") == original.replace(
        "from __future__ import absolute_import\n\n", "")


STORE = '''class Store:
    """Keeps things."""

    def __init__(self):
        self.items = {}

    def get(self, key):
        return self.items[key]

    def put(self, key, value):
        self.items[key] = value

    def drop(self, key):
        del self.items[key]
'''


def test_marker_at_column_zero_between_pinned_lines_keeps_what_lies_between() -> None:
    # frontier models often write the marker at column 0 inside a class: between two
    # pinned context lines it stands for exactly the lines between them
    sketch = '''class Store:
    """Keeps things."""
# ... existing code ...
    def put(self, key, value):
        self.items[key] = value
        return value
    # ... existing code ...
'''
    assert _merged(STORE, sketch, "store.py") == STORE.replace(
        "self.items[key] = value\n", "self.items[key] = value\n        return value\n")


def test_marker_at_column_zero_next_to_a_moved_line_still_abstains() -> None:
    # the line before the marker moved deeper (new code around it): the marker's
    # indentation is the only evidence of where its span starts
    sketch = '''# ... existing code ...
    def get(self, key):
        if key in self.items:
            return self.items[key]
# ... existing code ...
'''
    result = apply_sketch(STORE, sketch, path="store.py")
    assert not result.applied or result.merged == STORE.replace(
        "        return self.items[key]\n",
        "        if key in self.items:\n            return self.items[key]\n")


def test_shallow_marker_after_a_changed_body_prefix_does_not_delete_the_long_rest() -> None:
    original = '''class Option(object):
    ATTRS = ('action', 'type')
    TYPED_ACTIONS = ('store', 'append')

    def __init__(self, *opts, **attrs):
        self._short_opts = []
        self._long_opts = []
        for opt in opts:
            if opt[:2] == '--':
                self._long_opts.append(opt)
            else:
                self._short_opts.append(opt)


def other():
    return None
'''
    # a new class attribute, then the marker at column 0 (it stands for the rest of the
    # class): not "the class's new body in full", which would delete __init__
    sketch = '''class Option(object):
    ATTRS = ('action', 'type')
    TYPED_ACTIONS = ('store', 'append')
    TAKES_VALUE_ACTIONS = ('store', 'append')
# ... existing code ...
'''
    expected = original.replace("    TYPED_ACTIONS = ('store', 'append')\n",
                                "    TYPED_ACTIONS = ('store', 'append')\n"
                                "    TAKES_VALUE_ACTIONS = ('store', 'append')\n")
    result = apply_sketch(original, sketch, path="parser.py")
    assert not result.applied or result.merged == expected, result.merged


def test_whole_function_rewrite_above_a_header_level_marker_replaces_the_body() -> None:
    # the house style's whole-definition sketch: the body shown is the new body in full
    sketch = '''# ... existing code ...
def b(x):
    print(x, x)
    return x


# ... existing code ...
'''
    assert _merged(FUNCS, sketch, "f.py") == FUNCS.replace("    print(x)\n    return x\n",
                                                           "    print(x, x)\n    return x\n")


def _mocha_test(name: str) -> str:
    return f"""  it('should {name}', function(done){{
    var app = express();

    app.use(function(req, res){{
      res.send('{name}');
    }});

    request(app)
    .get('/')
    .expect(200, '{name}', done);
  }})
"""


def _mocha_file(names: list[str]) -> str:
    return ("var express = require('../')\n  , request = require('supertest');\n\n"
            "describe('res', function(){\n" + "\n".join(_mocha_test(n) for n in names) + "})\n")


def test_new_js_test_copying_its_neighbour_is_not_read_as_a_rewrite_of_the_next() -> None:
    # A new `it` block after `send b`: its repeated lines (var app, app.use, request(app),
    # .get('/'), `})`) also match `send c`'s, which reads as `send c` rewritten into it.
    before = _mocha_file(["send a", "send b", "send c", "send d"])
    after = _mocha_file(["send a", "send b", "send x", "send c", "send d"])
    sketch = ("// ... existing code ...\n    .expect(200, 'send b', done);\n  })\n\n"
              + _mocha_test("send x") + "  // ... existing code ...\n")
    result = apply_sketch(before, sketch, path="test/res.send.js")
    assert result.merged != _mocha_file(["send a", "send b", "send x", "send d"])
    assert not result.applied and "neighbour" in (result.reason or "")
    # with the next test's header shown after it, the insertion is certain
    sketch = sketch.replace("  // ... existing code ...\n",
                            "\n  it('should send c', function(done){\n  // ... existing code ...\n")
    assert _merged(before, sketch, "test/res.send.js") == after


PY_TESTS = '''def test_group(runner):
    def create_app():
        return Flask("group")

    @click.group(cls=FlaskGroup, create_app=create_app)
    def cli(**params):
        pass

    @cli.command()
    def test():
        click.echo(current_app.name)

    result = runner.invoke(cli, ["test"])
    assert result.exit_code == 0
    assert result.output == "group\\n"


def test_print_exceptions(runner):
    pass
'''


def test_new_python_test_copying_its_neighbour_does_not_delete_the_neighbours_lines() -> None:
    # the new test's copied lines (def cli, @cli.command(), result = ...) match the test
    # above, whose other lines would then read as deleted; or the test is inserted whole.
    # Read again with the new test's lines kept new (it repeats 6 of the neighbour's 10
    # lines: a new test, not the neighbour renamed), it is inserted whole and the neighbour
    # stays under the marker (tests/apply/test_sketch_new_definitions.py)
    sketch = '''# ... existing code ...

@pytest.mark.parametrize("debug", (True, False))
def test_group_debug(runner, debug):
    def create_app():
        app = Flask("group")
        app.debug = True
        return app

    @click.group(cls=FlaskGroup, create_app=create_app, set_debug_flag=debug)
    def cli(**params):
        pass

    @cli.command()
    def test():
        click.echo(str(current_app.debug))

    result = runner.invoke(cli, ["test"])
    assert result.exit_code == 0
    assert result.output == "%s\\n" % (not debug)


def test_print_exceptions(runner):
# ... existing code ...
'''
    result = apply_sketch(PY_TESTS, sketch, path="tests/test_cli.py")
    assert result.applied, result.reason
    added = sketch.split("# ... existing code ...\n\n")[1].split("def test_print_exceptions")[0]
    assert result.merged == PY_TESTS.replace("def test_print_exceptions", added
                                             + "def test_print_exceptions")
    assert result.stats["deleted_by_context"] == 0


def test_js_functions_assigned_to_members_are_definitions() -> None:
    from specialists.apply.languages import definition_name

    assert definition_name("res.send = function send(body) {", "javascript") == ("function", "send")
    assert definition_name("Router.prototype.use = function(fn) {", "javascript") == ("function", "use")
    assert definition_name("exports.parse = async function(){", "javascript") == ("function", "parse")
    assert definition_name("x.y = wrap(function(){", "javascript") is None
    assert definition_name("a.b = function(){", "python") is None


def _express_method(name: str) -> str:
    return f"""/**
 * Set {name} on the response.
 *
 * @param {{String}} value
 * @public
 */

res.{name} = function {name}(value) {{
  var self = this;
  if (value === undefined) {{
    return this;
  }}
  this.set('{name}', value);
  return this;
}};
"""


def test_new_js_member_function_copying_its_neighbour_abstains() -> None:
    # express's lib style: a new `res.xyz = function xyz(...)` with the same JSDoc and body
    # lines as `res.json` matches json's repeated lines, reading as json rewritten into xyz
    head = "'use strict';\n\nvar res = module.exports = {};\n\n"
    names = ["status", "links", "json", "jsonp"]
    before = head + "\n".join(_express_method(n) for n in names)
    sketch = ("// ... existing code ...\n" + _express_method("xyz")
              + "\n/**\n * Set jsonp on the response.\n// ... existing code ...\n")
    result = apply_sketch(before, sketch, path="lib/response.js")
    assert not result.applied
    assert "neighbour" in (result.reason or "") or "inserted" in (result.reason or "")


SEGMENT = '''class Segment:
    def __init__(self, text):
        self.text = text

    def __bool__(self):
        return bool(self.text)

    @property
    def cell_length(self):
        return len(self.text)

    @property
    def is_control(self):
        return False
'''


def test_context_block_that_may_show_a_deleted_definition_abstains() -> None:
    # `return bool(self.text)` / blank / `@property` closed up: cell_length deleted (the
    # second `@property`), or context before it (the first)? The block changes nothing
    # where it lands first, and the sketch's other edit does not say.
    sketch = '''class Segment:
    def __init__(self, text):
        self.text = text or ""
    # ... existing code ...
        return bool(self.text)

    @property
    # ... existing code ...
'''
    result = apply_sketch(SEGMENT, sketch, path="segment.py")
    assert not result.applied
    assert "whole definitions" in (result.reason or "")
    # shown with the deleted method's successor named, the deletion is read
    sketch = sketch.replace("    @property\n    # ... existing code ...\n",
                            "    @property\n    def is_control(self):\n    # ... existing code ...\n")
    expected = SEGMENT.replace('self.text = text', 'self.text = text or ""').replace(
        "    @property\n    def cell_length(self):\n        return len(self.text)\n\n", "")
    assert _merged(SEGMENT, sketch, "segment.py") == expected


def test_new_import_beside_a_kept_import_list_of_the_same_module_abstains() -> None:
    original = '''import h2.events

from httpx import (
    AsyncioBackend,
    Protocol,
    Request,
)


class Backend(AsyncioBackend):
    pass
'''
    # the list rewritten into one line (Protocol dropped), or a second import beside it?
    sketch = '''# ... existing code ...
import h2.events

from httpx import AsyncioBackend, Request


# ... existing code ...
'''
    result = apply_sketch(original, sketch, path="utils.py")
    assert not result.applied
    from specialists.apply.checks import check_split_imports

    out = ["import h2.events", "", "from httpx import AsyncioBackend, Request", "", "",
           "from httpx import (", "    AsyncioBackend,", ")"]
    try:
        check_split_imports(out, [0, 1, -1, -1, -1, 2, 3, 4])
        raise AssertionError("a new import beside the kept list passed")
    except Abstain as exc:
        assert "new import of 'httpx'" in exc.reason
    check_split_imports(out, [0, 1, 2, -1, -1, 5, 6, 7])  # the one-line import was there
    # single-line imports of one module side by side stay a plain addition
    single = original.replace("from httpx import (\n    AsyncioBackend,\n    Protocol,\n"
                              "    Request,\n)\n", "from httpx import AsyncioBackend\n")
    sketch = "import h2.events\n\nfrom httpx import Request\nfrom httpx import AsyncioBackend\n# ...\n"
    assert _merged(single, sketch, "utils.py") == single.replace(
        "from httpx import AsyncioBackend\n", "from httpx import Request\nfrom httpx import AsyncioBackend\n")
