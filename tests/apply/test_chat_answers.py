"""A sketch as a chat model sends it back: wrapped in a Markdown fence with a sentence
around it, headed by a line naming the file (``// filepath: src/app.js``), or with CRLF
line endings. The applier reads the fenced code alone, without the header (its abstain
span still counted in the answer's own lines), keeps the original's line endings on every
line, new ones included, and leaves fence lines and headers alone where the file has them
itself."""

from __future__ import annotations

import random

import pytest

from specialists.apply import apply_sketch
from specialists.apply.sketch_styles import chat_answer

ORIGINAL = "".join(f"def f{i}(x):\n    value = x + {i}\n    return value\n\n\n"
                   for i in range(6)).rstrip("\n") + "\n"
SKETCH = ("# ... existing code ...\ndef f2(x):\n    value = x + 20\n    y = 1\n    return value\n"
          "# ... existing code ...\n")
EXPECTED = ORIGINAL.replace("x + 2\n", "x + 20\n    y = 1\n")


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.mark.parametrize("original,sketch,expected", [
    (ORIGINAL, _crlf(SKETCH), EXPECTED),  # a CRLF sketch: the file stays LF, new lines too
    (_crlf(ORIGINAL), _crlf(SKETCH), _crlf(EXPECTED)),  # no "\r\r\n" on the new lines
    (_crlf(ORIGINAL), SKETCH, _crlf(EXPECTED)),  # an LF sketch into a CRLF file
], ids=["crlf-sketch-lf-file", "crlf-both", "lf-sketch-crlf-file"])
def test_line_endings_are_the_files(original: str, sketch: str, expected: str) -> None:
    result = apply_sketch(original, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == expected


@pytest.mark.parametrize("answer", [
    "```python\n" + SKETCH + "```\n",
    "Here is the change:\n\n```python\n" + SKETCH + "```\n\nThis adds `y`.\n",
    _crlf("Sure:\n```\n" + SKETCH + "```\n"),
])
def test_a_fenced_answer_is_read_as_its_code(answer: str) -> None:
    result = apply_sketch(ORIGINAL, answer, language="python")
    assert result.applied, result.reason
    assert result.merged == EXPECTED


def test_an_abstain_span_counts_the_answers_own_lines() -> None:
    answer = ("Here:\n```python\n# ... existing code ...\ndef nope(x):\n    zzz\n"
              "# ... existing code ...\n```\n")
    bare = answer.split("```python\n")[1].split("```")[0]
    plain = apply_sketch(ORIGINAL, bare, language="python")
    wrapped = apply_sketch(ORIGINAL, answer, language="python")
    assert not plain.applied and not wrapped.applied
    assert plain.span is not None and wrapped.span is not None
    assert wrapped.span == (plain.span[0] + 2, plain.span[1] + 2)  # "Here:" and the fence
    assert answer.split("\n")[wrapped.span[0] - 1] == bare.split("\n")[plain.span[0] - 1]


def test_fence_lines_the_file_has_itself_are_code() -> None:
    original = ('def usage():\n    """Example:\n\n```python\nrun(1)\n```\n    """\n'
                '    return 1\n\n\ndef other():\n    return 2\n')
    sketch = ('def usage():\n    """Example:\n\n```python\nrun(2)\n```\n    """\n'
              '    return 1\n# ... existing code ...\n')
    result = apply_sketch(original, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == original.replace("run(1)", "run(2)")


def test_a_new_file_from_a_fenced_answer_keeps_its_own_endings() -> None:
    result = apply_sketch("", "Here:\r\n```python\r\nx = 1\r\ny = 2\r\n```\r\n",
                          language="python")
    assert result.applied, result.reason
    assert result.merged == "x = 1\r\ny = 2\r\n"


def test_chat_answers_merge_as_the_bare_sketch() -> None:
    rng = random.Random(0)
    wrapped = [chat_answer(SKETCH, "python", rng) for _ in range(24)]
    assert any("\r\n" in w for w in wrapped) and any(not w.startswith("```") for w in wrapped)
    for answer in wrapped:
        result = apply_sketch(ORIGINAL, answer, language="python")
        assert result.applied and result.merged == EXPECTED, (answer, result.reason)


@pytest.mark.parametrize("header", ["# filepath: src/m.py", "# src/m.py", "# File: src/m.py",
                                    "# m.py", "# filepath: /home/me/proj/src/m.py"])
def test_a_first_line_naming_the_file_is_not_code(header: str) -> None:
    for answer in (f"{header}\n{SKETCH}", f"```python\n{header}\n{SKETCH}```\n"):
        result = apply_sketch(ORIGINAL, answer, language="python", path="src/m.py")
        assert result.applied, (answer, result.reason)
        assert result.merged == EXPECTED


def test_a_path_header_is_kept_where_it_is_the_files_or_names_another_file() -> None:
    own = "# src/m.py\n" + ORIGINAL  # the project writes its files' paths on top
    result = apply_sketch(own, "# src/m.py\n" + SKETCH, language="python", path="src/m.py")
    assert result.applied and result.merged == "# src/m.py\n" + EXPECTED
    # another file's name, unlabelled: a line of the sketch, which then matches nothing
    result = apply_sketch(ORIGINAL, "# other.py\n" + SKETCH, language="python", path="src/m.py")
    assert not result.applied or "# other.py\n" in (result.merged or "")
    # a new file may start with its own name; only a labelled header is dropped there
    assert apply_sketch("", "# src/m.py\nx = 1\n", path="src/m.py").merged == "# src/m.py\nx = 1\n"
    assert apply_sketch("", "# filepath: src/m.py\nx = 1\n", path="src/m.py").merged == "x = 1\n"


def test_the_span_counts_a_dropped_header_and_fence() -> None:
    answer = ("Hi\n```python\n# src/m.py\n# ... existing code ...\ndef nope(x):\n    zzz\n"
              "# ... existing code ...\n```\n")
    result = apply_sketch(ORIGINAL, answer, language="python", path="src/m.py")
    assert not result.applied and result.span is not None
    assert answer.split("\n")[result.span[0] - 1] == "def nope(x):"


def _numbered(sketch: str, fmt: str, first: int = 11, markers: bool = False) -> str:
    out, n = [], first
    for line in sketch.split("\n")[:-1]:
        if line.startswith("# ...") and not markers:
            out.append(line)
            continue
        out.append(fmt.format(n=n, line=line).rstrip() if not line else fmt.format(n=n, line=line))
        n += 1
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("fmt", ["{n:6d}\t{line}", "{n:6d}→{line}", "{n}: {line}", "{n} | {line}",
                                 "L{n}: {line}"])
@pytest.mark.parametrize("markers", [False, True], ids=["markers-bare", "markers-numbered"])
def test_line_numbers_copied_from_a_numbered_view_are_not_code(fmt: str, markers: bool) -> None:
    sketch = SKETCH.replace("    y = 1\n", "    y = 1\n\n")
    result = apply_sketch(ORIGINAL, _numbered(sketch, fmt, markers=markers), language="python")
    assert result.applied, result.reason
    assert result.merged == EXPECTED.replace("    y = 1\n", "    y = 1\n\n")


def test_numbers_that_are_code_stay() -> None:
    codes = "CODES = {\n    100: ('continue',),\n    200: ('ok',),\n}\n"
    # new entries of a dict keyed by numbers: the "12: " form, none of it the file's lines
    sketch = "CODES = {\n    100: ('continue',),\n    101: ('switching',),\n    102: ('processing',),\n" \
             "    # ... existing code ...\n"
    result = apply_sketch(codes, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == codes.replace(
        "    200:", "    101: ('switching',),\n    102: ('processing',),\n    200:")
    # a list of numbers, one a line
    numbers = "DATA = [\n    1,\n]\n"
    result = apply_sketch(numbers, "DATA = [\n    1,\n    2,\n    3,\n]\n", language="python")
    assert result.applied and result.merged == "DATA = [\n    1,\n    2,\n    3,\n]\n"


def test_a_numbered_view_in_the_dict_like_form_with_mostly_new_lines() -> None:
    # "12: " is also a dict's line, so that form needs more than one line of the file: here
    # two of six are the file's, each at the number the view gave it (f2 is lines 11-13)
    sketch = ("# ... existing code ...\n11: def f2(x):\n12:     value = x + 20\n13:     y = 1\n"
              "14:     z = 2\n15:     w = 3\n13:     return value\n# ... existing code ...\n")
    result = apply_sketch(ORIGINAL, sketch, language="python")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL.replace("x + 2\n", "x + 20\n    y = 1\n    z = 2\n    w = 3\n")
    # the same lines numbered where the file does not have them: read as they are
    shifted = sketch.replace("11: def", "31: def").replace("13:     return", "40:     return")
    result = apply_sketch(ORIGINAL, shifted, language="python")
    assert not result.applied or "31: def" in (result.merged or "")


TWO_BLOCKS = ("First f1:\n\n```python\n# ... existing code ...\ndef f1(x):\n    value = x + 10\n"
              "    return value\n# ... existing code ...\n```\n\nThen run the tests:\n```bash\n"
              "pytest -q\n```\nAnd f3:\n```python\n# ... existing code ...\ndef f3(x):\n"
              "    value = x + 30\n    return value\n# ... existing code ...\n```\n")


def test_a_change_shown_in_two_fences_is_read_as_one_sketch() -> None:
    # prose between the blocks, and a shell block (another language than the file's) left out
    result = apply_sketch(ORIGINAL, TWO_BLOCKS, language="python", path="m.py")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL.replace("x + 1\n", "x + 10\n").replace("x + 3\n", "x + 30\n")
    assert result.stats["code_blocks"] == 2 and result.diff.startswith("diff --git a/m.py")
    # a block that cannot be placed: the answer abstains, the span in the answer's own lines
    bad = TWO_BLOCKS.replace("def f3(x):\n    value = x + 30", "def nope(q):\n    zz = 1")
    result = apply_sketch(ORIGINAL, bad, language="python", path="m.py")
    assert not result.applied and (result.reason or "").startswith("the 2 code blocks read as")
    assert result.span is not None and bad.split("\n")[result.span[0] - 1] == "def nope(q):"
    # two blocks with no marker at the seam are two places, not one run of lines
    seamless = TWO_BLOCKS.replace("    return value\n# ... existing code ...\n```\n\nThen", "    return value\n```\n\nThen")
    seamless = seamless.replace("```python\n# ... existing code ...\ndef f3", "```python\ndef f3")
    result = apply_sketch(ORIGINAL, seamless, language="python", path="m.py")
    assert result.applied, result.reason
    assert result.merged == ORIGINAL.replace("x + 1\n", "x + 10\n").replace("x + 3\n", "x + 30\n")


def test_fences_the_file_holds_itself_are_not_split() -> None:
    readme = "# Use\n\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
    sketch = readme.replace("y = 2", "y = 3")
    result = apply_sketch(readme, sketch, path="README.md")
    assert result.applied and result.merged == sketch


@pytest.mark.parametrize("sketch", [
    "# Title\n\nSome text.\n\n## Usage\n\n```bash\npip install x\n```\n\n## End\n",
    "# Title\n\nSome text.\n\n## Usage\n\n```bash\npip install x\n```\n\n```python\nimport x\n```\n\n## End\n",
    "<!-- ... existing content ... -->\n## Usage\n\n```bash\npip install x\n```\n\n## End\n",
], ids=["one-block", "two-blocks", "lazy"])
def test_a_document_gaining_its_first_code_blocks_is_not_unwrapped(sketch: str) -> None:
    # the lines around the fences are the file's own (or its markers), not a chat's prose
    original = "# Title\n\nSome text.\n\n## End\n"
    result = apply_sketch(original, sketch, path="README.md")
    assert result.applied, result.reason
    assert result.merged == original.replace(
        "## End", sketch[sketch.index("## Usage"):sketch.index("## End")] + "## End")
