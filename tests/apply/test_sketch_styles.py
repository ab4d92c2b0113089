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
