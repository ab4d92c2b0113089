"""Edit answers in formats other than a lazy sketch: SEARCH/REPLACE blocks (aider's and
Cline's), unified diffs (git's, or a model's with wrong or no line numbers) and OpenAI's
apply_patch envelope. Each is placed by the same rules: exactly, then with whitespace and
indentation loosened, and only where one place fits (a diff's order, a line number that
names one place exactly, or a scope line picking it), else an abstain naming the block."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from specialists.apply import apply_sketch
from specialists.apply.edits import read_edit
from specialists.apply.sketch_styles import EDIT_FORMATS, edit_answer

GO = ("package main\n\nimport \"fmt\"\n\nfunc a() {\n\tx := 1\n\tif x > 0 {\n\t\tfmt.Println(x)\n"
      "\t}\n}\n\nfunc b() {\n\ty := 2\n\tfmt.Println(y)\n}\n")
GO_AFTER = GO.replace("\tfmt.Println(y)\n", "\tz := 3\n\tfmt.Println(y, z)\n")
PY = "".join(f"def f{i}(x):\n    value = x + {i}\n    return value\n\n\n"
             for i in range(4)).rstrip("\n") + "\n"


def _git_apply(tmp_path: Path, name: str, original: str, patch: str) -> str:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / name).write_bytes(original.encode())
    (tmp_path / "p.diff").write_bytes(patch.encode())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
    return (tmp_path / name).read_bytes().decode()


HUNK = " func b() {\n \ty := 2\n-\tfmt.Println(y)\n+\tz := 3\n+\tfmt.Println(y, z)\n }\n"


@pytest.mark.parametrize("answer,fmt", [
    ("--- a/main.go\n+++ b/main.go\n@@ -12,4 +12,5 @@\n" + HUNK, "unified_diff"),
    ("@@ -40,4 +40,5 @@\n" + HUNK, "unified_diff"),  # a wrong line number
    ("Here is the diff:\n```diff\n@@ ... @@\n" + HUNK + "```\nDone.\n", "unified_diff"),
    ("main.go\n```go\n<<<<<<< SEARCH\n\tfmt.Println(y)\n=======\n\tz := 3\n\tfmt.Println(y, z)\n"
     ">>>>>>> REPLACE\n```\n", "search_replace"),
    ("------- SEARCH\n\tfmt.Println(y)\n=======\n\tz := 3\n\tfmt.Println(y, z)\n+++++++ REPLACE\n",
     "search_replace"),
    ("*** Begin Patch\n*** Update File: main.go\n@@ func b() {\n" + HUNK + "*** End Patch\n",
     "apply_patch"),
    ("<<<<<<< ORIGINAL\n\tfmt.Println(y)\n=======\n\tz := 3\n\tfmt.Println(y, z)\n"
     ">>>>>>> UPDATED\n", "search_replace"),
    ("@@ -12,4 +12,5 @@\n" + HUNK + "\nThis adds z and prints it.\n", "unified_diff"),
], ids=["git-diff", "wrong-number", "fenced-no-numbers", "aider", "cline", "apply-patch",
        "aider-original-updated", "prose-after"])
def test_each_format_applies_with_a_clean_diff(answer: str, fmt: str, tmp_path: Path) -> None:
    result = apply_sketch(GO, answer, path="main.go")
    assert result.applied, result.reason
    assert result.merged == GO_AFTER and result.stats["format"] == fmt
    assert _git_apply(tmp_path, "main.go", GO, result.diff) == GO_AFTER


def test_a_block_found_in_several_places_abstains_unless_its_format_picks_one() -> None:
    # aider takes the first "}" — the wrong function; here it is an abstain naming both places
    answer = "<<<<<<< SEARCH\n}\n=======\n}\n// end\n>>>>>>> REPLACE\n"
    result = apply_sketch(GO, answer, path="main.go")
    assert not result.applied and result.span == (1, 6)
    assert "matches 2 places" in (result.reason or "") and "10, 15" in (result.reason or "")
    # a hunk's line number that names one of the places exactly picks it
    hunk = "@@ -15,1 +15,2 @@\n }\n+// end\n"
    result = apply_sketch(GO, hunk, path="main.go")
    assert result.applied and result.merged == GO + "// end\n" and result.confidence < 1.0
    # ... and one that names neither does not
    assert not apply_sketch(GO, "@@ -13,1 +13,2 @@\n }\n+// end\n", path="main.go").applied
    # an apply_patch scope line holds the block to that function's body
    patch = "*** Begin Patch\n*** Update File: m.py\n@@ def f2(x):\n-    return value\n+    return -value\n*** End Patch\n"
    result = apply_sketch(PY, patch, path="m.py")
    assert result.applied and result.merged == PY.replace(
        "x + 2\n    return value", "x + 2\n    return -value")


def test_a_diffs_hunks_are_placed_in_file_order() -> None:
    # the second hunk's lines are also in f0, before the first hunk: order picks f3's
    diff = ("@@ ... @@\n def f1(x):\n-    value = x + 1\n+    value = x + 10\n"
            "@@ ... @@\n     return value\n+# the end\n")
    original = PY.replace("def f3(x):\n    value = x + 3\n    return value\n", "def f3(x):\n    return value\n")
    # "    return value" alone is in every function; after f1's hunk it is still in f1, f2, f3
    result = apply_sketch(original, diff, path="m.py")
    assert not result.applied and "block 2 matches" in (result.reason or "")
    ordered = "@@ ... @@\n def f2(x):\n-    value = x + 2\n+    value = x + 20\n     return value\n" \
              "@@ ... @@\n def f3(x):\n     return value\n+    # done\n"
    result = apply_sketch(original, ordered, path="m.py")
    assert result.applied, result.reason
    assert result.merged == original.replace("x + 2\n", "x + 20\n").replace(
        "def f3(x):\n    return value\n", "def f3(x):\n    return value\n    # done\n")


def test_search_replace_blocks_apply_in_turn() -> None:
    # aider's reading: the second block finds a line the first one wrote
    answer = ("<<<<<<< SEARCH\n    value = x + 1\n=======\n    value = x + 100\n>>>>>>> REPLACE\n"
              "<<<<<<< SEARCH\n    value = x + 100\n    return value\n=======\n"
              "    value = x + 100\n    return value * 2\n>>>>>>> REPLACE\n")
    result = apply_sketch(PY, answer, path="m.py")
    assert result.applied, result.reason
    assert result.merged == PY.replace("x + 1\n    return value\n", "x + 100\n    return value * 2\n")
    # a block found once in the original is placed there, as the model saw the file, even
    # where the block before it wrote a second copy of its lines
    twice = ("<<<<<<< SEARCH\ndef f3(x):\n=======\ndef f3(x):\n    pass\n\n\ndef f4(x):\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\ndef f4(x):\n=======\ndef f5(x):\n>>>>>>> REPLACE\n")
    assert apply_sketch(PY, twice, path="m.py").applied  # f4 is once in the file as it stands
    result = apply_sketch(PY, twice.replace("def f4(x):\n>>>>>>> REPLACE\n<<<", "def f2(x):\n>>>>>>> REPLACE\n<<<")
                          .replace("SEARCH\ndef f4(x):\n=======\ndef f5", "SEARCH\ndef f2(x):\n=======\ndef f5"), path="m.py")
    assert result.applied and "def f5(x):\n    value = x + 2" in (result.merged or "")
    assert (result.merged or "").count("def f2(x):") == 1


def test_indentation_and_blank_lines_are_loosened_alike_for_the_new_lines() -> None:
    # the block written without the function's indentation: found, and the new lines shifted
    answer = "<<<<<<< SEARCH\nvalue = x + 1\nreturn value\n=======\nvalue = x + 1\nlog(value)\n" \
             "return value\n>>>>>>> REPLACE\n"
    result = apply_sketch(PY, answer, path="m.py")
    assert result.applied, result.reason
    assert result.merged == PY.replace("x + 1\n    return value", "x + 1\n    log(value)\n    return value")
    assert result.stats["loose_blocks"] == 1 and result.confidence == 0.9
    # a tab file answered in spaces: the new lines in tabs
    answer = "<<<<<<< SEARCH\n    y := 2\n    fmt.Println(y)\n=======\n    y := 2\n    z := 3\n" \
             "    fmt.Println(y, z)\n>>>>>>> REPLACE\n"
    assert apply_sketch(GO, answer, path="main.go").merged == GO_AFTER
    # a blank line the model left out of the lines to find
    answer = "<<<<<<< SEARCH\n    return value\ndef f1(x):\n=======\n    return value\n\n\n" \
             "def f1(x):\n    assert x\n>>>>>>> REPLACE\n"
    result = apply_sketch(PY, answer, path="m.py")
    assert result.applied and result.merged == PY.replace("def f1(x):\n", "def f1(x):\n    assert x\n")


def test_what_cannot_be_read_is_an_abstain_that_says_why() -> None:
    cases = {
        "<<<<<<< SEARCH\n}\n=======\n}\n": "is not closed",
        "other.go\n```go\n<<<<<<< SEARCH\n}\n=======\n}\n>>>>>>> REPLACE\n```\n": "other.go, not main.go",
        "--- a/main.go\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-package main\n": "deletes the file",
        "--- a/x.go\n+++ b/x.go\n@@ ... @@\n-a\n+b\n": "edits x.go, not main.go",
        "<<<<<<< SEARCH\nfunc nope() {\n=======\nfunc yes() {\n>>>>>>> REPLACE\n": "not in the file",
        "<<<<<<< SEARCH\n\n=======\nx := 1\n>>>>>>> REPLACE\n": "no lines to find",
        "<<<<<<< SEARCH\n\ty := 2\n=======\n\t// ... existing code ...\n>>>>>>> REPLACE\n": "placeholder",
        "*** Begin Patch\n*** Update File: main.go\n@@ func c() {\n-\ty := 2\n+\ty := 3\n*** End Patch\n": "scope line",
        # a context line that lost its space, with more changes after it: not half a hunk
        "@@ ... @@\n func b() {\n-\ty := 2\n+\ty := 4\nfmt.Println(y)\n-}\n+} // b\n": "neither context",
        "*** Begin Patch\n*** Update File: main.go\n@@\n \ty := 2\nfmt.Println(y)\n-}\n+}//\n*** End Patch\n": "neither context",
    }
    for answer, why in cases.items():
        result = apply_sketch(GO, answer, path="main.go")
        assert not result.applied and why in (result.reason or ""), (answer, result.reason)


def test_a_multi_file_diff_gives_each_file_its_part() -> None:
    diff = ("diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f0(x):\n"
            "-    value = x + 0\n+    value = x\n"
            "diff --git a/main.go b/main.go\n--- a/main.go\n+++ b/main.go\n@@ -12,4 +12,5 @@\n" + HUNK)
    assert apply_sketch(PY, diff, path="src/a.py").merged == PY.replace("x + 0\n", "x\n")
    assert apply_sketch(GO, diff, path="main.go").merged == GO_AFTER
    result = apply_sketch(GO, diff)  # no path: which part is meant is not said
    assert not result.applied and "2 files" in (result.reason or "")


def test_new_files_crlf_and_final_newlines() -> None:
    assert apply_sketch("", "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n",
                        path="n.py").merged == "a = 1\nb = 2\n"
    assert apply_sketch("", "*** Begin Patch\n*** Add File: n.py\n+a = 1\n*** End Patch\n",
                        path="n.py").merged == "a = 1\n"
    crlf = GO.replace("\n", "\r\n")
    result = apply_sketch(crlf, "@@ ... @@\r\n" + HUNK.replace("\n", "\r\n"), path="main.go")
    assert result.merged == GO_AFTER.replace("\n", "\r\n")
    # "\ No newline at end of file" after an added line: the new file has none
    diff = "@@ -14,2 +14,2 @@\n \tfmt.Println(y)\n-}\n+} // b\n\\ No newline at end of file\n"
    assert apply_sketch(GO, diff, path="main.go").merged == GO[:-2] + "} // b"
    # ... and after a removed line: the old file had none, the new one has one
    diff = "@@ -15,1 +15,1 @@\n-}\n\\ No newline at end of file\n+}\n"
    result = apply_sketch(GO[:-1], diff, path="main.go")
    assert result.applied and result.merged == GO


@pytest.mark.parametrize("original,path", [
    ("Run:\n\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n", "docs/blocks.md"),
    ("@@ -1,2 +1,2 @@\n-a\n+b\n", "docs/example.md"),
    ("x\n", "fix.patch"),
])
def test_a_file_that_holds_these_markers_itself_is_edited_by_sketch(original: str, path: str) -> None:
    sketch = original.rstrip("\n") + "\nmore\n"
    assert read_edit(sketch, original, path) is None
    result = apply_sketch(original, sketch, path=path)
    assert result.applied and result.merged == sketch


@pytest.mark.parametrize("fmt", EDIT_FORMATS)
def test_generated_answers_for_unique_blocks_apply_exactly(fmt: str) -> None:
    # edit_answer (benchmarks/apply.py --edit-format) on a small edit: a block that occurs
    # once is placed exactly whatever the draw (context, numbers, fences, dedent)
    after = PY.replace("x + 2\n", "x + 2\n    value *= 2\n").replace("def f3(x):", "def f3(x, y=0):")
    for seed in range(20):
        text, label = edit_answer(PY, after, fmt, random.Random(seed), "m.py", "python")
        result = apply_sketch(PY, text, path="m.py")
        if label == "unique":
            assert result.applied and result.merged == after, (seed, text, result.reason)
        else:
            assert not result.applied or result.merged == after, (seed, text)


def test_no_answer_lands_in_the_wrong_place_in_a_file_of_repeated_lines() -> None:
    # files made of a few lines repeated, edited at random: every format's answers (wrong
    # line numbers among them) are applied exactly or refused, never placed elsewhere
    rng = random.Random(7)
    alphabet = ["x = 1", "y = 2", "return x", "", "if x:", "    pass", "z = 3"]
    seen = {"exact": 0, "abstained": 0}
    for t in range(450):
        a = [rng.choice(alphabet) for _ in range(rng.randint(3, 25))]
        b = list(a)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b))
            op = rng.choice("rid")
            if op == "r":
                b[i] = f"w{t} = {rng.randint(0, 9)}"
            elif op == "i":
                b.insert(i, f"v{t} = {rng.randint(0, 9)}")
            elif len(b) > 1:
                del b[i]
        before, after = "\n".join(a) + "\n", "\n".join(b) + "\n"
        if before == after:
            continue
        text, _ = edit_answer(before, after, EDIT_FORMATS[t % 3], random.Random(t), "m.py", "python")
        result = apply_sketch(before, text, path="m.py")
        assert not result.applied or result.merged == after, (before, text)
        seen["exact" if result.applied else "abstained"] += 1
    assert seen["exact"] > 2 * seen["abstained"], seen  # mostly answered, not refused
