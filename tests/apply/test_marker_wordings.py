"""Marker and deletion wordings read by kind, not by phrase (issue 36): a placeholder in
words of its own (bracketed, angle-bracketed, dashed, counted), a deletion noted after the
name, a placeholder with no comment at all; and the real comments that must stay code. ``reword_sketch`` (the development-only
rewording of frontier sketches) must leave the applier's answer as it was."""

from __future__ import annotations

import random

import pytest

from specialists.apply import apply_sketch
from specialists.apply import sketch_styles as styles
from specialists.apply.markers import LineKind, classify

PLACEHOLDERS = (
    "# [existing code]", "# <rest of the code>", "# (omitted for brevity)", "# <unchanged>",
    "# [snip]", "# ... elided ...", "# 12 unchanged lines", "# --- unchanged ---", "# […]",
    "# everything else stays the same", "# remaining code is identical", "# rest as is",
    "# <... existing ...>", "// [rest of file unchanged]", "/* (code unchanged) */",
    "{/* <unchanged> */}", "<!-- [snip] -->",
)
REAL_COMMENTS = (
    "# existing file", "# same as above", "# -----", "# rest api", "# TODO: remove foo",
    "# keep the connection open", "# Previous versions returned None here",
    "// the rest is handled by the caller below", "# (see above)",
    "# Original implementation:",  # a label for the code below it
)


@pytest.mark.parametrize("line", PLACEHOLDERS)
def test_placeholder_in_words_of_its_own_is_a_marker(line: str) -> None:
    assert classify(line, "python")[0] == LineKind.MARKER


@pytest.mark.parametrize("line", ("... existing code ...", "...existing code...",
                                  "… rest of the file …", "[... unchanged ...]", "<... snip ...>"))
@pytest.mark.parametrize("language", ("python", "javascript", "json", None))
def test_a_placeholder_with_no_comment_is_a_marker(line: str, language: str | None) -> None:
    assert classify(line, language)[0] == LineKind.MARKER


@pytest.mark.parametrize("line", ("...rest", "...args,", "... other ...", "foo(...args...)"))
def test_spreads_and_python_ellipsis_stay_code(line: str) -> None:
    assert classify(line, "javascript")[0] == LineKind.CODE
    assert classify("...", "python")[0] == LineKind.CODE


def test_a_json_sketch_with_bare_placeholders_merges() -> None:
    original = '{\n  "name": "demo",\n  "version": "1.0.0",\n  "private": true,\n' \
               '  "license": "MIT"\n}\n'
    sketch = '{\n  ... existing code ...\n  "version": "1.1.0",\n  ... rest of the file ...\n}\n'
    result = apply_sketch(original, sketch, language="json")
    assert result.applied, result.reason
    assert result.merged == original.replace("1.0.0", "1.1.0")


@pytest.mark.parametrize("line", REAL_COMMENTS)
def test_real_comments_stay_code(line: str) -> None:
    assert classify(line, "python")[0] == LineKind.CODE


@pytest.mark.parametrize("line", ("# save deleted", "# save() has been removed",
                                  "# save: removed", "# [removed save]", "# (deleted save)",
                                  "# removing save"))
def test_deletion_noted_after_the_fact_names_the_definition(line: str) -> None:
    kind, info = classify(line, "python")
    assert kind == LineKind.REMOVE and info is not None and info.remove_name == "save"


ORIGINAL = "".join(f"def f{i}(x):\n    value = x + {i}\n    return value\n\n\n"
                   for i in range(6)).rstrip("\n") + "\n"


def test_a_noted_deletion_removes_the_definition_and_an_unknown_name_stays_a_comment() -> None:
    sketch = "# [existing code]\ndef f2(x):\n    value = x + 2\n    return value\n\n\n" \
             "# f3() has been removed\ndef f4(x):\n# <rest of the code>\n"
    result = apply_sketch(ORIGINAL, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL.replace(
        "def f3(x):\n    value = x + 3\n    return value\n\n\n", "")
    # "nothing removed" names nothing the file defines: a comment the new code carries
    kind, _ = classify("# nothing removed", "python")
    assert kind == LineKind.REMOVE
    sketch = "# [existing code]\ndef f2(x):\n    # nothing removed\n    value = x + 2\n" \
             "    return value\n# <rest of the code>\n"
    result = apply_sketch(ORIGINAL, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL.replace("def f2(x):\n", "def f2(x):\n    # nothing removed\n")


def test_rewording_a_frontier_sketch_keeps_the_answer() -> None:
    after = ORIGINAL.replace("value = x + 3\n", "value = x + 30\n    value += 1\n") \
        .replace("def f5(x):\n    value = x + 5\n    return value\n", "").rstrip("\n") + "\n"
    seen = 0
    for seed in range(12):
        sk = styles.make_frontier_sketch(ORIGINAL, after, "python", random.Random(seed),
                                         ("context", "definition", "inner")[seed % 3])
        if not sk.changed:
            continue
        text, reworded = styles.reword_sketch(sk.text, "python", random.Random(seed))
        if not reworded:
            continue
        seen += 1
        assert text != sk.text and text.count("\n") == sk.text.count("\n")
        before = apply_sketch(ORIGINAL, sk.text, language="python")
        now = apply_sketch(ORIGINAL, text, language="python")
        assert (now.applied, now.merged) == (before.applied, before.merged), (sk.text, text)
    assert seen >= 6
