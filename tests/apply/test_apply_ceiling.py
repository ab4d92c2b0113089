"""benchmarks/apply_ceiling.py: a sketch that another commit turns into byte for byte is
counted two-way, one that only its own commit gives is not; bad input is refused."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "apply_ceiling.py"

# f and g are the same two lines; h follows, so a marker after either has the same shape
BEFORE = ("def f():\n    x = 1\n    return x\n\n\n"
          "def g():\n    x = 1\n    return x\n\n\n"
          "def h():\n    return 0\n")
# a line added in f: with one line of context each side (x = 1 above, return x below) the
# sketch is the same as for the same line added in g
TWO_WAY = BEFORE.replace("def f():\n    x = 1\n", "def f():\n    x = 1\n    y = 2\n")
# a line added next to something only f has
ONE_WAY = BEFORE.replace("def f():\n", "def f():\n    # f only\n")


def _history(path: Path, afters: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for n, after in enumerate(afters):
            out.write(json.dumps({"commit": f"c{n}", "path": "m.py", "language": "python",
                                  "before": BEFORE, "after": after}) + "\n")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_two_way_sketches_are_found_and_one_way_ones_are_not(tmp_path: Path) -> None:
    two = _history(tmp_path / "two.jsonl.gz", [TWO_WAY])
    done = _run(str(two), "--generator", "lines")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    lines = summary["groups"]["lines"]
    # the k = 1 sketch (and others with one line of context) reads the same from the line
    # added in g; the wider ones show `def f():` and read one way
    assert 1 <= lines["two_way_n"] < lines["n"]
    assert lines["ceiling_exact_at_no_wrong"] == round(1 - lines["two_way_n"] / lines["n"], 4)
    # the applier cannot be right on a two-way sketch by reading it: it abstains or guesses
    assert summary["groups"]["lines"]["applier_on_two_way"]["exact"] < 1.0 or \
        summary["groups"]["lines"]["applier_on_two_way"]["abstain"] > 0

    one = _history(tmp_path / "one.jsonl.gz", [ONE_WAY])
    done = _run(str(one), "--generator", "both")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["sketches"] > 0
    assert all(group["two_way_n"] == 0 for group in summary["groups"].values())


def test_bad_input_is_refused_with_what_to_give(tmp_path: Path) -> None:
    done = _run(str(tmp_path / "missing.jsonl.gz"))
    assert done.returncode == 2 and "no such file" in done.stderr
    hist = _history(tmp_path / "h.jsonl.gz", [TWO_WAY])
    done = _run(str(hist), "--generator", "reworded")
    assert done.returncode == 2 and "--generator" in done.stderr
