"""The deterministic applier: marker styles, placement, abstains, bad input, diffs."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from specialists.apply import ApplyOptions, FileEdit, apply_many, apply_sketch, combined_diff
from specialists.apply.checks import check_parse, check_redefinitions
from specialists.apply.markers import LineKind, classify
from specialists.apply.result import Abstain

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def _merged(original: str, sketch: str, path: str) -> str:
    """The merged file, after checking the sketch applied (the reason shows if not)."""
    result = apply_sketch(original, sketch, path=path)
    assert result.applied, result.reason
    assert result.merged is not None
    return result.merged


def _case(folder: Path) -> tuple[str, str, str, str]:
    original = next(folder.glob("original.*"))
    sketch = next(folder.glob("sketch.*"))
    expected = next(folder.glob("expected.*"))
    return original.read_text(), sketch.read_text(), expected.read_text(), original.name


@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
def test_fixture_merges_exactly(folder: Path) -> None:
    original, sketch, expected, name = _case(folder)
    result = apply_sketch(original, sketch, path=name)
    assert result.status == "applied", result.reason
    assert result.merged == expected


@pytest.mark.parametrize("line", [
    "# ... existing code ...", "// ... rest of code ...", "/* ... existing code ... */",
    "{/* ... existing code ... */}", "<!-- ... -->", "-- ... existing code ...",
    "// ... keep calculateTotal ...", "// ... code remains the same", "# ...", "#...",
    "// … unchanged …", "# rest of code unchanged", "// existing code here",
])
def test_marker_styles(line: str) -> None:
    assert classify(line)[0] == LineKind.MARKER


@pytest.mark.parametrize("line", [
    "...", "x = foo(...)", "# wait for it...", "# for other cases.", "// TODO: existing bug",
    "--count;", "#include <stdio.h>", "return ...",
    "# ... fileio/naming-a-file#win32-file-namespaces",  # a URL cut over two comment lines
])
def test_not_markers(line: str) -> None:
    assert classify(line)[0] == LineKind.CODE


def test_named_keep_and_remove_are_read() -> None:
    kind, info = classify("// ... keep calculateTotal ...")
    assert kind == LineKind.MARKER and info is not None and info.keep_name == "calculateTotal"
    kind, info = classify("# remove `x = 1`")
    assert kind == LineKind.REMOVE and info is not None and info.remove_quotes == ("x = 1",)
    kind, info = classify("// remove the unused function")
    assert kind == LineKind.REMOVE and info is not None and info.remove_name == "unused"


ORIGINAL = """import os


def first():
    value = 1
    return value


def second():
    value = 2
    return value


def third():
    return 3
"""


def test_missing_first_and_last_marker_keep_the_rest() -> None:
    sketch = "def second():\n    value = 20\n    return value\n"
    assert _merged(ORIGINAL, sketch, path="m.py") == ORIGINAL.replace("value = 2\n", "value = 20\n")


def test_uniform_indentation_shift_is_undone() -> None:
    sketch = "    # ...\n    def second():\n        value = 2\n        print(value)\n        return value\n    # ...\n"
    assert _merged(ORIGINAL, sketch, path="m.py") == ORIGINAL.replace(
        "    value = 2\n", "    value = 2\n    print(value)\n")


def test_order_of_anchors_resolves_repeated_lines() -> None:
    # "return value" occurs twice; the unique header before it decides which one.
    sketch = "# ...\ndef second():\n    value = 2\n    return value + 1\n# ...\n"
    assert _merged(ORIGINAL, sketch, path="m.py") == ORIGINAL.replace(
        "value = 2\n    return value\n", "value = 2\n    return value + 1\n")


def test_deletion_by_context_and_by_remove_comment() -> None:
    by_context = "# ...\ndef second():\n    return value\n# ...\n"
    result = apply_sketch(ORIGINAL, by_context, path="m.py")
    assert result.applied and "value = 2" not in (result.merged or "")
    by_comment = "# ...\n# remove `value = 2`\n# ...\n"
    result = apply_sketch(ORIGINAL, by_comment, path="m.py")
    assert result.applied and result.merged == ORIGINAL.replace("    value = 2\n", "")


def test_remove_definition_by_name() -> None:
    result = apply_sketch(ORIGINAL, "# ...\n# remove the second function\n# ...\n", path="m.py")
    assert result.applied, result.reason
    assert "def second" not in (result.merged or "") and "def third" in (result.merged or "")


# ---- abstain instead of guessing ---------------------------------------------------------

TWINS = """def a():
    x = 1
    return x


def b():
    x = 1
    return x
"""


def test_ambiguous_anchor_abstains_with_span() -> None:
    sketch = "# ...\n    x = 1\n    log(x)\n    return x\n# ...\n"
    result = apply_sketch(TWINS, sketch, path="t.py")
    assert result.status == "abstained"
    assert "ambiguous" in (result.reason or "") or "more than one" in (result.reason or "")
    assert result.span == (2, 4)


def test_structure_resolves_what_lines_cannot() -> None:
    sketch = "# ...\ndef b():\n    x = 1\n    log(x)\n    return x\n"
    result = apply_sketch(TWINS, sketch, path="t.py")
    assert result.applied
    assert result.merged == TWINS + "" if False else TWINS.replace(
        "def b():\n    x = 1\n", "def b():\n    x = 1\n    log(x)\n")


def test_mass_deletion_abstains() -> None:
    big = "".join(f"line_{i} = {i}\n" for i in range(100))
    # No marker: would delete 96 lines (two pinned lines a side make the deletion certain).
    sketch = "line_0 = 0\nline_1 = 1\nline_98 = 98\nline_99 = 99\n"
    result = apply_sketch(big, sketch + "# ...\n", path="big.py")
    assert result.status == "abstained" and "delete" in (result.reason or "")
    relaxed = apply_sketch(big, sketch + "# ...\n", path="big.py",
                           options=ApplyOptions(max_delete_share=1.0))
    assert relaxed.applied


def test_placeholder_left_abstains() -> None:
    sketch = "# ...\ndef third():\n    return compute(1, # ... existing args ...)\n"
    result = apply_sketch(ORIGINAL, sketch, path="m.py")
    assert result.status == "abstained" and "placeholder" in (result.reason or "")


def test_broken_syntax_abstains() -> None:
    sketch = "# ...\ndef third():\n    return (3\n"
    result = apply_sketch(ORIGINAL, sketch, path="m.py")
    assert result.status == "abstained" and "parse" in (result.reason or "")
    unchecked = apply_sketch(ORIGINAL, sketch, path="m.py", options=ApplyOptions(parse_check=False))
    assert unchecked.applied


def test_block_with_no_anchor_abstains() -> None:
    sketch = "# ...\ncompletely_new_code()\n# ...\n"
    result = apply_sketch(ORIGINAL, sketch, path="m.py")
    assert result.status == "abstained" and result.span == (2, 2)


def test_named_keep_that_is_not_kept_abstains() -> None:
    sketch = "# ...\ndef first():\n    value = 10\n    return value\n# ... keep nonexistent ...\n"
    result = apply_sketch(ORIGINAL, sketch, path="m.py")
    assert result.status == "abstained" and "nonexistent" in (result.reason or "")


# ---- bad input: a clear answer, bounded time, never an exception -------------------------

@pytest.mark.parametrize("original, sketch, word", [
    ("", "# ... existing code ...\nx = 1\n", "empty"),
    ("abc\x00def\n", "# ...\nx\n", "binary"),
    (ORIGINAL, "", "empty"),
    (ORIGINAL, "   \n\n", "empty"),
    (ORIGINAL, "# ... existing code ...\n", "markers"),
    (ORIGINAL, ORIGINAL, "nothing"),
])
def test_bad_input_abstains_with_reason(original: str, sketch: str, word: str) -> None:
    result = apply_sketch(original, sketch, path="x.py")
    assert result.status == "abstained"
    assert word in (result.reason or "")


def test_empty_original_takes_a_marker_free_sketch_as_the_new_file() -> None:
    result = apply_sketch("", "print('hi')\n", path="new.py")
    assert result.applied and result.merged == "print('hi')\n"
    assert result.diff.startswith("diff --git a/new.py b/new.py")


def test_sketch_in_another_language_gets_a_clear_result() -> None:
    go = "package main\n\nfunc main() {\n\tprintln(1)\n}\n"
    sketch = "# ... existing code ...\ndef main():\n    print(2)\n# ... existing code ...\n"
    result = apply_sketch(go, sketch, path="main.go")
    assert result.status in ("applied", "abstained")
    assert result.status == "abstained"


def test_crlf_original_with_lf_sketch_keeps_crlf() -> None:
    original = ORIGINAL.replace("\n", "\r\n")
    sketch = "# ...\ndef third():\n    return 30\n"
    assert _merged(original, sketch, path="m.py") == original.replace("return 3\r\n", "return 30\r\n")


def test_tabs_file_with_spaces_sketch_keeps_tabs() -> None:
    original = "func a() {\n\tx := 1\n\treturn\n}\n\nfunc b() {\n\ty := 2\n}\n"
    sketch = "func a() {\n    x := 1\n    log(x)\n    return\n}\n// ...\n"
    assert _merged(original, sketch, path="a.go") == original.replace("\tx := 1\n", "\tx := 1\n\tlog(x)\n")


def test_fifty_thousand_lines_in_bounded_time() -> None:
    original = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(17_000))
    sketch = "# ...\ndef f16000():\n    return -1\n# ...\n"
    started = time.perf_counter()
    result = apply_sketch(original, sketch, path="huge.py")
    assert time.perf_counter() - started < 10
    assert result.applied and "return -1" in (result.merged or "")
    many_braces = "}\n" * 50_000
    started = time.perf_counter()
    result = apply_sketch(many_braces, "// ...\n}\nx\n}\n// ...\n", path="b.js")
    assert time.perf_counter() - started < 10
    assert result.status in ("applied", "abstained")


def test_non_string_input_abstains() -> None:
    result = apply_sketch(b"bytes", "x")  # type: ignore[arg-type]
    assert result.status == "abstained"


# ---- diffs -------------------------------------------------------------------------------

def _git_apply(tmp_path: Path, files: dict[str, str], patch: str) -> dict[str, str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    for name, text in files.items():
        (tmp_path / name).write_bytes(text.encode())
    (tmp_path / "p.diff").write_bytes(patch.encode())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "--check", "p.diff"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
    return {name: (tmp_path / name).read_bytes().decode() for name in files}


@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
def test_diff_is_git_apply_clean(folder: Path, tmp_path: Path) -> None:
    original, sketch, expected, name = _case(folder)
    result = apply_sketch(original, sketch, path=name)
    assert _git_apply(tmp_path, {name: original}, result.diff)[name] == expected


@pytest.mark.parametrize("original, sketch", [
    ("a\nb\nc", "a\nb\nc\nd\n"),  # no final newline, line appended
    ("a\nb\nc", "// ...\nb\nC"),  # no final newline, last line changed
    ("a\r\nb\r\nc\r\n", "a\nB\nc\n"),  # CRLF
])
def test_diff_edge_cases_apply(original: str, sketch: str, tmp_path: Path) -> None:
    result = apply_sketch(original, sketch, path="f.txt")
    assert result.applied, result.reason
    assert _git_apply(tmp_path, {"f.txt": original}, result.diff)["f.txt"] == result.merged


def test_several_files_in_one_request(tmp_path: Path) -> None:
    edits = []
    originals = {}
    for folder in CASES[:4]:
        original, sketch, _, name = _case(folder)
        edits.append(FileEdit(original, sketch, path=name))
        originals[name] = original
    edits.append(FileEdit(TWINS, "# ...\n    x = 1\n    y()\n    return x\n# ...\n", path="t.py"))
    originals["t.py"] = TWINS
    results = apply_many(edits)
    assert [r.applied for r in results] == [True, True, True, True, False]
    patched = _git_apply(tmp_path, originals, combined_diff(results))
    for edit, result in zip(edits, results):
        assert patched[edit.path] == (result.merged if result.applied else edit.original)


# ---- abstain instead of a silent wrong answer (issue 4: silent deletion is the worst) ----

COPIES = (
    "def first():\n    setup()\n    run(1)\n    check(1)\n    teardown()\n\n\n"
    "def second():\n    setup()\n    run(2)\n    check(2)\n    teardown()\n"
)


def test_copied_lines_do_not_delete_the_code_they_copy() -> None:
    # A new function that copies lines of an old one, anchored above only by a blank line:
    # matching the copies would delete the old body between them. Either the new function
    # goes in whole and nothing is lost, or the applier abstains.
    sketch = "# ...\n    teardown()\n\n\ndef third():\n    setup()\n    run(3)\n    check(3)\n"
    result = apply_sketch(COPIES, sketch, path="c.py")
    if result.applied:
        assert result.merged == COPIES + "\n\ndef third():\n    setup()\n    run(3)\n    check(3)\n"


def test_uncertain_implicit_deletion_abstains() -> None:
    # "setup()" and "teardown()" repeat: which lines between them go is not certain.
    sketch = "# ...\n    setup()\n    teardown()\n# ...\n"
    result = apply_sketch(COPIES, sketch, path="c.py")
    assert not result.applied and result.reason


def test_one_line_dropped_below_a_repeated_line_applies() -> None:
    # "check(2)" is found once: the "setup()" right above it is the one the sketch shows,
    # and the one line between goes (any other "setup()" would delete more than a line)
    sketch = "# ...\n    setup()\n    check(2)\n# ...\n"
    assert _merged(COPIES, sketch, path="c.py") == COPIES.replace("    run(2)\n", "")


def test_pinned_implicit_deletion_applies() -> None:
    sketch = "# ...\ndef second():\n    setup()\n    check(2)\n    teardown()\n"
    assert _merged(COPIES, sketch, path="c.py") == COPIES.replace("    run(2)\n", "")


def test_marker_shallower_than_the_code_it_keeps_abstains() -> None:
    # y2() may replace y() or go before it: a marker at the if's level cannot stand for
    # the rest of the if's body, so keeping y() is a guess.
    original = "def f():\n    if a:\n        x()\n        y()\n    z()\n"
    sketch = "# ...\n    if a:\n        x()\n        y2()\n    # ...\n"
    result = apply_sketch(original, sketch, path="f.py")
    assert not result.applied
    assert "indentation" in (result.reason or "")


def test_full_definition_replaces_its_last_line() -> None:
    sketch = "def first():\n    setup()\n    run(1)\n    check(1)\n    teardown(force=True)\n# ...\n"
    assert _merged(COPIES, sketch, path="c.py") == COPIES.replace("teardown()", "teardown(force=True)", 1)


def test_changed_header_over_its_body_replaces_the_header_only() -> None:
    sketch = "# ...\ndef second(x):\n    # ... existing code ...\n"
    assert _merged(COPIES, sketch, path="c.py") == COPIES.replace("def second():", "def second(x):")


def test_sketch_decides_a_final_newline_it_writes() -> None:
    result = apply_sketch("a = 1\nb = 2", "# ...\nb = 3\n", path="f.py")
    assert result.applied and result.merged == "a = 1\nb = 3\n"


def test_spaces_to_tabs_in_the_files_style_is_kept() -> None:
    original = "func f() {\n\tx := 1\n    y := 2\n\treturn\n}\n"
    result = apply_sketch(original, "// ...\n\tx := 1\n\ty := 3\n\treturn\n}\n", path="f.go")
    assert result.applied and result.merged == "func f() {\n\tx := 1\n\ty := 3\n\treturn\n}\n"


def test_blank_line_dropped_next_to_a_rewrite_is_kept() -> None:
    original = "x = 1\n\n\n# old note\ny = 2\n"
    result = apply_sketch(original, "# ...\nx = 1\n\n# new note\ny = 2\n", path="f.py")
    assert result.applied and result.merged == "x = 1\n\n\n# new note\ny = 2\n"


def test_new_lines_keep_the_sketchs_bytes_when_it_copies_the_files() -> None:
    # A mixed file (spaces in a template, tabs in code): the sketch copies the tab lines
    # byte for byte, so its new tab-indented line is taken as written.
    original = "var t = `\n    a\n    b\n    c\n`\n\nfunc f() {\n\tx()\n\ty()\n}\n"
    result = apply_sketch(original, "// ...\nfunc f() {\n\tx()\n\tz()\n\ty()\n}\n", path="f.go")
    assert result.applied and "\n\tz()\n" in (result.merged or "")


def test_block_whose_edge_line_it_could_not_match_abstains() -> None:
    # The block's last lines ("elif ...", "for x in xs:") are context in the centre branch,
    # but its rewritten pad lines also fit the right branch with no deletion: two readings.
    original = (
        "def f(align):\n    if align == 'center':\n        for x in xs:\n            x.strip()\n"
        "            x.pad_left(w // 2)\n            x.pad_right(w)\n"
        "    elif align == 'right':\n        for x in xs:\n            x.strip()\n"
        "            x.pad_left(w)\n    return xs\n"
    )
    sketch = (
        "# ...\n            x.strip()\n            x.pad_right(w // 2)\n            x.pad_left(w)\n"
        "    elif align == 'right':\n        for x in xs:\n            # ...\n"
    )
    result = apply_sketch(original, sketch, path="f.py")
    assert not result.applied and result.span is not None


def test_one_line_declaration_has_no_body_to_replace() -> None:
    # "type F func() error" opens no block: the marker after it keeps the next function.
    original = "package p\n\ntype F func() error\n\nfunc g() {\n\tx()\n}\n"
    sketch = "// ...\n\n// F is a callback\ntype F func() error\n// ... existing code ...\n"
    assert _merged(original, sketch, path="p.go") == original.replace(
        "\ntype F", "\n// F is a callback\ntype F")


def test_context_only_block_that_would_just_reindent_abstains() -> None:
    # The block's lines occur at two depths; landing where the depth disagrees would only
    # re-indent them, so the block is not placed there silently.
    original = ("func a() {\n\tif err != nil {\n\t\tlog()\n\t\treturn err\n\t}\n}\n\n"
                "func b() {\n\tif err != nil {\n\treturn err\n\t}\n}\n")
    sketch = "// ...\n\tif err != nil {\n\t\treturn err\n\t// ... existing code ...\n"
    result = apply_sketch(original, sketch, path="a.go")
    if result.applied:  # the only right reading deletes log() in a()
        assert result.merged == original.replace("\t\tlog()\n", "", 1)


HEADERS = '''class Console:
    def __repr__(self):
        return "<console>"

    def _detect(self) -> str:
        """Detect the colour system."""
        if not self.is_terminal:
            return "none"
        return "256"

    def other(self):
        return 1
'''


def test_header_rewritten_over_several_lines_replaces_the_old_header() -> None:
    sketch = '''# ... code remains the same
    def _detect(
        self,
    ) -> Literal["auto", "none"]:
        """Detect the colour system."""
        if not self.is_terminal:
            return "none"
        return "256"
    # ... keep existing code ...
'''
    assert _merged(HEADERS, sketch, path="c.py") == HEADERS.replace(
        "    def _detect(self) -> str:\n",
        '    def _detect(\n        self,\n    ) -> Literal["auto", "none"]:\n')


def test_python_block_left_without_a_body_abstains() -> None:
    # tree-sitter's Python grammar reads "def f(): / def f(" without an error; Python does not
    raw = HEADERS.split("\n")[:-1]
    out = raw[:5] + ["    def _detect(", "        self,", "    ) -> int:"] + raw[5:]
    origin = list(range(5)) + [-1, -1, -1] + list(range(5, len(raw)))
    with pytest.raises(Abstain, match="no body"):
        check_parse(raw, out, origin, "python")
    check_parse(raw, raw, list(range(len(raw))), "python")  # the original itself passes


def test_prose_remove_comment_in_new_code_is_kept_as_code() -> None:
    original = "func f() {\n\tfor _, c := range cs {\n\t\tif skip {\n\t\t\tcontinue\n\t\t}\n\t}\n}\n"
    sketch = ("// ... existing code ...\n\tfor _, c := range cs {\n"
              "\t\t// Remove the hidden entries in this case\n\t\tc = visible(c)\n"
              "\t\tif skip {\n\t\t\t// ... existing code ...\n")
    assert _merged(original, sketch, path="f.go") == original.replace(
        "\t\tif skip {", "\t\t// Remove the hidden entries in this case\n\t\tc = visible(c)\n"
        "\t\tif skip {")


TESTS = '''import pytest


class TestMake:
    def test_zero(self):
        assert make("z")

    @pytest.mark.parametrize(
        "kind",
        ["a", "b"],
    )
    def test_one(self, kind):
        """One of each kind."""
        value = make(kind)
        assert value.ok

    def test_last(self):
        assert True
'''


def test_new_test_copying_its_neighbour_does_not_replace_it() -> None:
    # The copied decorator lines match test_one's; read that way, test_one's other lines
    # look deleted. Read as an insertion before test_last, nothing is deleted.
    sketch = '''# ... existing code ...

    @pytest.mark.parametrize(
        "kind",
        ["a", "b"],
    )
    def test_two(self, kind):
        """Two of each kind."""
        other = make(kind, twice=True)
        assert other.ok

    def test_last(self):
        # ... existing code ...
'''
    result = apply_sketch(TESTS, sketch, path="t.py")
    if result.applied:
        assert "def test_one(self, kind):" in result.merged
    else:
        assert "inserted between two adjacent original lines" in (result.reason or "")


def test_remove_range_whose_last_line_repeats_abstains() -> None:
    original = "a = 1\nb = 2\nend()\nc = 3\nend()\nd = 4\n"
    sketch = "# ...\n# remove `b = 2` … `end()`\n# ...\n"
    result = apply_sketch(original, sketch, path="m.py")
    assert result.status == "abstained" and "more than once" in (result.reason or "")


def test_sketch_whose_only_change_is_a_blank_line_deletes_it() -> None:
    # A blank run written shorter is usually a dropped line (kept); when keeping it would
    # leave the sketch changing nothing, the shorter run is the edit.
    original = '"""Tests for the config."""\n\n\nimport pytest\n\n\ndef test_a():\n    assert True\n'
    sketch = '# ... existing code ...\n"""Tests for the config."""\n\nimport pytest\n# ... existing code ...\n'
    assert _merged(original, sketch, path="t.py") == original.replace('"""\n\n\nimport', '"""\n\nimport')


def test_new_line_takes_the_indentation_of_its_neighbours() -> None:
    # The file's template is indented with spaces, its code with tabs; the sketch is
    # shifted by two spaces. The new line is indented like the code around it.
    template = "".join(f"    line {i} of the template\n" for i in range(12))
    original = ("package p\n\nconst script = `\n" + template + "`\n\n"
                "func f(name string) string {\n\tv := name\n\tv = clean(v)\n\treturn v\n}\n")
    sketch = ("  // ... existing code ...\n  \tv := name\n  \tv = strings.ReplaceAll(v, \"-\", \"_\")\n"
              "  \tv = clean(v)\n  \t// ... existing code ...\n")
    assert _merged(original, sketch, path="p.go") == original.replace(
        "\tv = clean(v)\n", "\tv = strings.ReplaceAll(v, \"-\", \"_\")\n\tv = clean(v)\n")


def test_code_moved_out_of_a_block_does_not_set_the_indentation_shift() -> None:
    # The moved lines lose one level; the context lines next to the markers keep theirs,
    # and they, not the moved majority, say the sketch is not shifted.
    original = '''class Connection:
    async def release(self):
        if self.done:
            self.state.start_next_cycle()
        else:
            event = ConnectionClosed()
            try:
                self.state.send(event)
            except ProtocolError:
                pass
            self.writer.close()
            if hasattr(self.writer, "wait_closed"):
                await self.writer.wait_closed()

        if self.on_release is not None:
            await self.on_release(self)

    def info(self):
        return self.state
'''
    moved = '''    def close(self):
        event = ConnectionClosed()
        try:
            self.state.send(event)
        except ProtocolError:
            pass
        self.writer.close()
        if hasattr(self.writer, "wait_closed"):
            self.writer.wait_closed()

'''
    sketch = ('# ... existing code ...\n            self.state.start_next_cycle()\n        else:\n'
              '            self.close()\n\n        if self.on_release is not None:\n'
              '            await self.on_release(self)\n\n' + moved
              + '    def info(self):\n        # ... existing code ...\n')
    result = apply_sketch(original, sketch, path="c.py")
    assert result.applied, result.reason
    head, tail = original.split("        else:\n", 1)
    rest = tail.split("\n        if self.on_release", 1)[1]
    expected = (head + "        else:\n            self.close()\n\n        if self.on_release" + rest)
    expected = expected.replace("    def info(self):", moved + "    def info(self):")
    assert result.merged == expected


def test_remove_comment_at_the_end_deletes_only_what_it_names() -> None:
    # The sketch's last marker is missing after a remove comment: the lines after the named
    # ones are not the comment's to delete.
    original = "class It:\n    def __iter__(self):\n        return self\n\n    # Python 2 compat\n" \
               "    next = __next__\n\n    def render(self):\n        draw()\n\n    def finish(self):\n        done()\n"
    sketch = "# ... existing code ...\n    def __iter__(self):\n        return self\n" \
             "    # remove `# Python 2 compat` … `next = __next__`\n"
    result = apply_sketch(original, sketch, path="it.py")
    if result.applied:
        assert "def finish(self):" in result.merged and "def render(self):" in result.merged
    else:
        assert "beside what its remove comment names" in (result.reason or "")


def test_new_definition_beside_a_kept_one_of_its_name_abstains() -> None:
    # The sketch rewrites main() after helper(): read literally the old main() stays too.
    original = "import os\n\n\ndef main():\n    run()\n\n\ndef helper():\n    pass\n"
    sketch = "# ...\ndef helper():\n    pass\n\n\ndef main():\n    run(fast=True)\n"
    result = apply_sketch(original, sketch, path="m.py")
    assert result.status == "abstained" and "side by side" in (result.reason or "")
    # the same name in another block, or decorated (a property's setter), is no redefinition
    out = ["class A:", "    def f(self):", "        pass", "class B:", "    def f(self):", "        pass",
           "    @f.setter", "    def f(self, v):", "        pass"]
    check_redefinitions(out, [0, 1, 2, -1, -1, -1, -1, -1, -1], "python")


def test_marker_at_column_zero_inside_a_template_keeps_the_body() -> None:
    # Go code generated from a template string: init()'s body has template lines at column
    # 0, so a marker at column 0 right after "func init() {" may stand inside that body.
    original = ("package tpl\n\nfunc RootTemplate() []byte {\n\treturn []byte(`\npackage cmd\n\n"
                "func Execute() {\n\terr := rootCmd.Execute()\n}\n\nfunc init() {\n{{- if .Viper }}\n"
                "\tcobra.OnInitialize(initConfig)\n{{ end }}\n\trootCmd.Flags()\n}\n`)\n}\n")
    sketch = ("// ... existing code ...\nfunc Execute() {\n\terr := rootCmd.Execute()\n\tif err != nil {\n"
              "\t\tos.Exit(1)\n\t}\n}\n\nfunc init() {\n// ... code remains the same\n")
    assert _merged(original, sketch, path="tpl/main.go") == original.replace(
        "\terr := rootCmd.Execute()\n}", "\terr := rootCmd.Execute()\n\tif err != nil {\n\t\tos.Exit(1)\n\t}\n}")
