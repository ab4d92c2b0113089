"""A sketch that adds a definition whose lines copy lines of the file (the applier, issue 36:
tests by kind of sketch). A new class's ``pass`` or a new function's closing ``}`` matches
the same line of a definition beside it; anchored there, the new definition seems to
replace the old one's header, and the applier refused the sketch ("deletes original lines
between two lines that are not certainly placed"). It now reads such a sketch a second time
with the lines of the definitions it adds, by names the original does not define, kept new
(``merge._new_code_copies``). The same holds after five other refusals the same
misplacement causes: the block also reads as inserted whole, its anchors disagree, an edge
line is left unmatched, a new unit repeats its neighbour, the gap search ties. The second
reading is taken when it passes every check, unless the sketch shows the old code replaced
after all: a new definition made mostly of a deleted one's lines (a class renamed, its
body kept), new code written within a few lines of an old line it copies that the file has
once, or a definition the first reading deleted left with no caller (the sketch rewrote
its callers to the new name). Then the refusal stands."""

from __future__ import annotations

from specialists.apply import apply_sketch

UNCERTAIN = "the sketch deletes original lines between two lines that are not certainly placed"
TWO_READINGS = ("the block also reads as new code inserted between two adjacent original lines, "
                "deleting nothing")

HANDLERS = '''import pytest


def test_handler(app, client):
    class CustomError(Exception):
        pass

    @app.errorhandler(CustomError)
    def on_custom(e):
        return "custom"

    @app.route("/custom")
    def custom():
        raise CustomError()

    assert client.get("/custom").data == b"custom"


def test_other(app):
    class ParentError(Exception):
        pass

    assert app
'''

# The new class's ``pass`` is also ``CustomError``'s; placed there, the new class would
# replace the test's header and ``CustomError``'s.
NEW_CLASS = '''# ... existing code ...

    class BadError(BaseException):
        pass

    @app.errorhandler(CustomError)
    # ... rest of the file unchanged ...
        return "custom"

    with pytest.raises(AssertionError):
        app.register_error_handler(BadError, None)

    # ... code remains the same
'''

NEW_CLASS_WANT = HANDLERS.replace('''        pass

    @app.errorhandler(CustomError)''', '''        pass

    class BadError(BaseException):
        pass

    @app.errorhandler(CustomError)''').replace('''        return "custom"
''', '''        return "custom"

    with pytest.raises(AssertionError):
        app.register_error_handler(BadError, None)
''')

UTIL = '''function getNativePromise() {
    try {
        var promise = new Promise(function(){});
        if (classString(promise) === "[object Promise]") {
            return Promise;
        }
    } catch (e) {}
}

function domainBind(self, cb) {
    return self.bind(cb);
}

var ret = {
    isNode: isNode,
    domainBind: domainBind
};
'''

# ``domainBind`` rewritten as ``contextBind`` where it stands, and its one use renamed: no
# marker says the old function stays, and kept, nothing would call it.
RENAMED = '''// ... keep existing code ...
        if (classString(promise) === "[object Promise]") {
            return Promise;
        }
    // ... unchanged ...
}

function contextBind(ctx, cb) {
    if (ctx === null) {
        return cb;
    }
    return ctx.bind(cb);
}

var ret = {
    isNode: isNode,
    contextBind: contextBind
};
'''

# The same new function beside ``domainBind``, which the sketch still uses.
ADDED = RENAMED.replace('''    contextBind: contextBind
''', '''    contextBind: contextBind,
    domainBind: domainBind
''')

ESCAPE = '''var _MATCH_HTML = /[&<>'"]/g;

exports.escapeXML = function (markup) {
  return String(markup).replace(_MATCH_HTML, encodeChar);
};
exports.escapeXML.toString = function () {
  return Function.prototype.toString.call(this) + ';\\n' + escapeFuncStr;
};

/**
 * Naive copy of properties from one object to another.
 */
exports.shallowCopy = function (to, from) {
  for (var p in from) {
    to[p] = from[p];
  }
  return to;
};
'''

# The anonymous ``toString`` made a named function: its body line is the old one's, and the
# new code lands right below it. The old function goes; the sketch does not show that with
# a marker or a remove comment, so the applier may not keep it beside its copy.
NAMED = '''// ... existing code ...

function escapeXMLToString() {
  return Function.prototype.toString.call(this) + ';\\n' + escapeFuncStr;
}

try {
  Object.defineProperty(exports.escapeXML, 'toString', { value: escapeXMLToString });
} catch (err) {
  console.warn('Unable to set escapeXML.toString');
}

/**
 * Naive copy of properties from one object to another.
 // ... code remains the same
'''


def test_new_class_copying_a_neighbours_line_is_inserted_whole():
    result = apply_sketch(HANDLERS, NEW_CLASS, path="tests/test_handlers.py")
    assert result.status == "applied", result.reason
    assert result.merged == NEW_CLASS_WANT


def test_the_neighbour_keeps_its_header():
    result = apply_sketch(HANDLERS, NEW_CLASS, path="tests/test_handlers.py")
    assert "def test_handler(app, client):\n    class CustomError(Exception):" in result.merged
    assert result.stats["deleted_by_context"] == 0


def test_function_renamed_where_it_stands_is_not_kept_beside_the_new_one():
    result = apply_sketch(UTIL, RENAMED, path="lib/util.js")
    assert result.status == "abstained"
    assert result.reason == UNCERTAIN


def test_new_function_beside_one_still_used_is_added():
    result = apply_sketch(UTIL, ADDED, path="lib/util.js")
    assert result.status == "applied", result.reason
    assert "function domainBind(self, cb) {\n    return self.bind(cb);\n}" in result.merged
    assert result.merged.count("function contextBind(ctx, cb) {") == 1
    assert result.merged.index("function domainBind") < result.merged.index("function contextBind")


def test_new_code_copying_the_line_it_lands_beside_is_refused():
    result = apply_sketch(ESCAPE, NAMED, path="lib/utils.js")
    assert result.status == "abstained"
    assert result.reason == UNCERTAIN


OPTIONS = '''import click


def test_unknown_options(runner):
    @click.command()
    def cli():
        pass

    result = runner.invoke(cli, ['--foo'])
    assert result.exception


def test_show_envvar(runner):
    @click.command()
    @click.option('--arg1', show_envvar=True)
    def cmd(arg):
        pass

    result = runner.invoke(cmd, ['--help'],
                           auto_envvar_prefix='TEST')
    assert not result.exception
    assert 'TEST_ARG1' in result.output


def test_custom_validation(runner):
    assert runner
'''

# A new test whose ``def cli():`` is the first test's, and whose invoke and assert lines are
# the second's: read with those lines matched, it rewrites the second test (or deletes the
# first's header); as a whole new test it goes before the test the sketch names below it.
GROUP_TEST = '''# ... rest of the file unchanged ...

def test_show_envvar_in_group(runner):
    @click.group()
    def cli():
        pass

    @cli.command()
    @click.option('--baz', show_envvar=True)
    def foo_bar(baz):
        pass

    result = runner.invoke(cli, ['foo-bar', '--help'],
                           auto_envvar_prefix='TEST')
    assert not result.exception
    assert 'TEST_FOO_BAR_BAZ' in result.output


def test_custom_validation(runner):
    # ... keep existing code ...
'''

GROUP_TEST_WANT = OPTIONS.replace('''def test_custom_validation(runner):''', GROUP_TEST.split(
    "# ... rest of the file unchanged ...\n\n")[1].split("    # ... keep")[0].rstrip("\n"))

MAKE = '''import pytest


class TestMakeAttr(object):
    """
    Tests for `attr`.
    """
    def test_returns_attr(self):
        a = attr()
        assert isinstance(a, _Attr)

    def test_catches_defaults(self):
        with pytest.raises(ValueError) as e:
            attr(default_value=42, default_factory=list)
        assert "ambiguous" in e.value.args[0]


class TestAddMethods(object):
    def test_repr(self):
        assert repr(C())
'''

# The class renamed, one line of it changed: read as a new class, the old one would stay.
RENAMED_CLASS = MAKE.split("class TestAddMethods")[0].replace(
    "class TestMakeAttr(object):", "class TestAttr(object):").replace(
    "isinstance(a, _Attr)", "isinstance(a, _CountingAttr)") + "# ... existing code ...\n"


def test_new_test_that_also_read_as_a_rewrite_is_inserted_whole():
    result = apply_sketch(OPTIONS, GROUP_TEST, path="tests/test_options.py")
    assert result.status == "applied", result.reason
    assert result.merged == GROUP_TEST_WANT
    assert result.stats["deleted_by_context"] == 0


def test_class_renamed_with_its_body_is_not_added_beside_the_old_one():
    result = apply_sketch(MAKE, RENAMED_CLASS, path="tests/test_make.py")
    assert result.status == "abstained"
    assert result.reason == TWO_READINGS

FORMATTING = '''import click


def test_basic(runner):
    @click.command()
    def cli():
        """First command."""

    result = runner.invoke(cli, ['--help'], terminal_width=60)
    assert not result.exception


def test_wrapping(runner):
    @click.group()
    def cli():
        """Group."""

    result = runner.invoke(cli, ['a', '--help'], terminal_width=54)
    assert not result.exception


def test_empty_help(runner):
    assert runner
'''

# The new test's last line, next to the marker, is the one such line of the first test:
# as an anchor it says the block goes above the line the block's first anchor pins. Read
# with the new test's lines kept new, the anchors agree, and that edge line is new on
# purpose, not context left unmatched.
AFTER_WRAPPING = '''# ... existing code ...
    result = runner.invoke(cli, ['a', '--help'], terminal_width=54)
    assert not result.exception


def test_wrapping_long_name(runner):
    @click.command()
    def cli():
        """First command."""

    assert 'First command.' in result.output
    result = runner.invoke(cli, ['--help'], terminal_width=60)
# ... existing code ...
'''


def test_new_test_whose_edge_line_copies_an_earlier_test_goes_where_the_block_is_anchored():
    result = apply_sketch(FORMATTING, AFTER_WRAPPING, path="tests/test_formatting.py")
    assert result.status == "applied", result.reason
    added = AFTER_WRAPPING.split("assert not result.exception\n")[1].split("# ... existing")[0]
    assert result.merged == FORMATTING.replace(
        "    assert not result.exception\n\n\ndef test_empty_help",
        "    assert not result.exception\n" + added + "\n\ndef test_empty_help")

CONFIG_TESTS = '''import unittest


class ConfigTestCase(unittest.TestCase):

    def common_object_test(self, app):
        assert app.secret_key == 'devkey'

    def test_config_from_file(self):
        app = flask.Flask(__name__)
        try:
            app.config.from_pyfile('missing.cfg')
        except IOError as e:
            assert 'missing.cfg' in str(e)
        else:
            assert 0, 'expected exception'
        self.common_object_test(app)

    def test_config_from_object(self):
        app = flask.Flask(__name__)
        app.config.from_object(__name__)
        self.common_object_test(app)


def suite():
    return unittest.TestSuite()
'''

# The new method holds the file's one ``except IOError as e:``, in the first test: anchored
# there, the block's first line (``self.common_object_test(app)``, next to the marker) is
# left new although the original has it, and pinning it there fails. Read with the new
# method's lines kept new, the block follows the last test, before ``suite``.
ENVVAR_TEST = '''# ... (unchanged) ...
        self.common_object_test(app)

    def test_config_from_envvar(self):
        app = flask.Flask('envvar')
        try:
            app.config.from_envvar('FOO_SETTINGS')
        except IOError as e:
            assert 'FOO_SETTINGS' in str(e)
        else:
            assert 0, 'expected exception'
        assert app.config.from_envvar('FOO_SETTINGS', silent=True) is False


def suite():
    # ... other methods ...
'''


def _assert_method_added_before_suite(sketch: str) -> None:
    """The sketch's new method (between its first ``self.common_object_test(app)`` and
    ``suite``) lands after the last test, before ``suite``, and nothing else changes."""
    result = apply_sketch(CONFIG_TESTS, sketch, path="tests/flask_tests.py")
    assert result.status == "applied", result.reason
    method = sketch.split("self.common_object_test(app)\n", 1)[1].split("\n\ndef suite")[0]
    assert result.merged == CONFIG_TESTS.replace(
        "        self.common_object_test(app)\n\n\ndef suite",
        "        self.common_object_test(app)\n" + method + "\n\ndef suite")


def test_new_method_holding_a_line_found_once_goes_before_the_line_after_it():
    _assert_method_added_before_suite(ENVVAR_TEST)

# The same new method, ending as its neighbours do: its ``app = flask.Flask(__name__)`` and
# ``self.common_object_test(app)`` land within a few lines of the last test's, but every
# test repeats them. Only a line the file has once, copied beside itself, says the old
# code is rewritten there.
ENVVAR_TEST_ALIKE = ENVVAR_TEST.replace("flask.Flask('envvar')", "flask.Flask(__name__)").replace(
    "        assert app.config.from_envvar('FOO_SETTINGS', silent=True) is False\n",
    "        self.common_object_test(app)\n")


def test_new_method_repeating_lines_every_test_has_is_added_below_a_like_one():
    _assert_method_added_before_suite(ENVVAR_TEST_ALIKE)
