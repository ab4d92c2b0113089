"""specialists/apply/sketch_styles.py: the frontier-style sketch generator (the apply
benchmarks' second generator, and the fallback's training data) writes sketches whose
intended reading is the committed file, in the conventions it documents."""

from __future__ import annotations

import random

from specialists.apply import apply_sketch
from specialists.apply import sketch_styles as styles
from specialists.apply.markers import LineKind, classify

BEFORE = "".join(f"def f{i}(x):\n    value = x + {i}\n    return value\n\n\n" for i in range(12))


def _expand(sketch: str, after: str) -> bool:
    """Whether the sketch's code lines appear in ``after`` in order (a marker stands for
    lines left out, nothing else changed)."""
    lines = after.split("\n")
    at = 0
    for line in sketch.rstrip("\n").split("\n"):
        if classify(line.strip(), "python")[0] != LineKind.CODE or line.strip().startswith("#"):
            continue
        while at < len(lines) and lines[at] != line.rstrip():
            at += 1
        if at == len(lines):
            return False
        at += 1
    return True


def test_no_leading_marker_when_the_edit_starts_the_file() -> None:
    after = "import os\n\n\n" + BEFORE
    sk = styles.make_frontier_sketch(BEFORE, after, "python", random.Random(1), "context")
    assert sk.changed and not sk.leading_marker and sk.trailing_marker
    assert sk.text.startswith("import os\n")
    assert classify(sk.text.rstrip("\n").split("\n")[-1].strip())[0] == LineKind.MARKER


def test_deletion_by_omission_shows_both_sides_closed_up() -> None:
    after = BEFORE.replace("def f5(x):\n    value = x + 5\n    return value\n\n\n", "")
    for seed in range(6):
        sk = styles.make_frontier_sketch(BEFORE, after, "python", random.Random(seed), "context")
        assert sk.deletions in ("omission", "comment")
        assert _expand(sk.text, after)
        text = sk.text.split("\n")
        # the next definition's header is shown right after the last line before the gap
        k = next(i for i, line in enumerate(text) if line.strip() == "def f6(x):")
        above = [line for line in text[:k] if line.strip()]
        assert classify(above[-1].strip())[0] != LineKind.MARKER


def test_every_kind_reads_back_to_the_committed_file() -> None:
    after = BEFORE.replace("value = x + 3\n", "value = x + 30\n    value += 1\n")
    for kind in ("context", "definition", "inner"):
        for seed in range(4):
            sk = styles.make_frontier_sketch(BEFORE, after, "python", random.Random(seed), kind)
            assert sk.changed and _expand(sk.text, after), sk.text
            result = apply_sketch(BEFORE, sk.text, language="python")
            # the applier may abstain; it must not return another file
            assert not result.applied or result.merged == after, (kind, seed, sk.text)


# ---- the third style (issue 36): terse outlines ----------------------------------------------

CLASS = "import os\n\n\nclass A:\n" + "".join(
    f"    @property\n    def f{i}(self, x):\n        value = x + {i}\n        return value\n\n"
    for i in range(6)) + "\n\ndef tail():\n    return 1\n"


def _markers(text: str) -> list[int]:
    lines = text.rstrip("\n").split("\n")
    return [i for i, line in enumerate(lines)
            if line.strip() and classify(line.strip(), "python")[0] == LineKind.MARKER]


def test_outline_kinds_show_the_edit_and_elide_the_rest() -> None:
    after = CLASS.replace("value = x + 3\n", "value = x + 30\n        value += 1\n")
    seen_kinds = set()
    for kind in styles.OUTLINE_KINDS:
        for seed in range(6):
            sk = styles.make_outline_sketch(CLASS, after, "python", random.Random(seed), kind)
            assert sk.changed and sk.kind == kind
            seen_kinds.add(kind)
            assert "        value += 1" in sk.text and _expand(sk.text, after), sk.text
            lines = sk.text.rstrip("\n").split("\n")
            if kind == "above":
                # one line of text above the change: the method's header, no decorator
                assert "    def f3(self, x):" in lines and "    @property" not in lines
            if kind == "outline":
                # the siblings as an outline: every other method's header, bodies elided
                for i in (0, 1, 2, 4, 5):
                    assert f"    def f{i}(self, x):" in lines
                assert "        value = x + 1" not in lines
    assert seen_kinds == set(styles.OUTLINE_KINDS)


def test_outline_blank_lines_next_to_markers_are_left_out() -> None:
    after = CLASS.replace("        return value\n\n    @property\n    def f2",
                          "        return value + 1\n\n    @property\n    def f2")
    for seed in range(8):
        sk = styles.make_outline_sketch(CLASS, after, "python", random.Random(seed), "above")
        lines = sk.text.rstrip("\n").split("\n")
        for i in _markers(sk.text):
            for d in (-1, 1):
                if 0 <= i + d < len(lines):
                    assert lines[i + d].strip(), sk.text


def test_outline_noise_leaves_out_the_trailing_marker_or_doubles_one() -> None:
    after = CLASS.replace("value = x + 2\n", "value = x + 20\n")
    noises = set()
    for seed in range(60):
        sk = styles.make_outline_sketch(CLASS, after, "python", random.Random(seed), "above")
        noises.add(sk.noise)
        last = sk.text.rstrip("\n").split("\n")[-1]
        is_marker = classify(last.strip(), "python")[0] == LineKind.MARKER
        if sk.noise == "no_trailing_marker":
            assert not is_marker and sk.label == "ambiguous"
        elif "[... unchanged ...]" not in last and "<existing code>" not in last:
            assert is_marker or last.strip() in ("#", "")
    assert {"none", "no_trailing_marker", "double_marker"} <= noises


def test_outline_deleted_definition_is_omitted_or_noted() -> None:
    after = CLASS.replace("    @property\n    def f4(self, x):\n        value = x + 4\n"
                          "        return value\n\n", "")
    styles_seen = set()
    for seed in range(30):
        sk = styles.make_outline_sketch(CLASS, after, "python", random.Random(seed), "above")
        styles_seen.add(sk.deletions)
        assert "def f4" not in sk.text.replace("f4 removed", "").replace("f4() was", "") \
            .replace("deleted f4", "").replace("dropped f4", "")
    assert styles_seen <= {"omission", "note"} and styles_seen
