"""A block that fits two places equally well is placed only where the sketch itself says
which, where asked (the applier, issue 36: tests by kind of sketch; ``gap_search.break_tie``;
both options off by default, see BENCHMARKS.md): its new lines rewrite lines like them at
one place and not at the other (``tie_rewrite``), or it is the sketch's last block, with no
marker after it, and fits at the end of the file deleting nothing (``tie_file_end``). Every
other tie still abstains."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specialists.apply import ApplySpecialist, apply_sketch, gap_search
from specialists.apply.result import ApplyOptions

ROOT = Path(__file__).resolve().parents[2]
TIE = "ambiguous: the block matches in more than one place"
REWRITES = ApplyOptions(tie_rewrite=True)
FILE_END = ApplyOptions(tie_file_end=True)

TWO_FUNCTIONS = '''def load(path):
    check(path)
    log("loading")
    return read(path)


def save(path, text):
    check(path)
    write(path, text, mode="a")
    return read(path)
'''

# Both places delete one line between ``check(path)`` and ``return read(path)``; only in
# ``save`` is that line like the new one.
REWRITE = '''# ... existing code ...
    check(path)
    write(path, text, mode="w")
    return read(path)
'''

CLASS = '''class Version:
    def __init__(self, major):
        self.major = major

    def __eq__(self, other):
        return self.major == other.major

    def __lt__(self, other):
        return self.major < other.major

'''

APPENDED = '''# ... existing code ...

    def __hash__(self):
        return hash(self.major)
'''


def _refused_as_a_tie(original: str, sketch: str, path: str,
                      options: ApplyOptions | None = None) -> None:
    result = apply_sketch(original, sketch, path=path, options=options)
    assert not result.applied
    assert result.reason.startswith(TIE)


def test_block_whose_new_line_rewrites_a_like_line_at_one_place_is_placed_there() -> None:
    result = apply_sketch(TWO_FUNCTIONS, REWRITE, path="io.py", options=REWRITES)
    assert result.applied, result.reason
    assert result.merged == TWO_FUNCTIONS.replace('mode="a"', 'mode="w"')


def test_block_whose_new_line_is_like_the_lines_at_both_places_abstains() -> None:
    both = TWO_FUNCTIONS.replace('log("loading")', 'write(path, text, mode="r")')
    _refused_as_a_tie(both, REWRITE, "io.py", REWRITES)


def test_the_rewrite_reading_is_off_by_default() -> None:
    _refused_as_a_tie(TWO_FUNCTIONS, REWRITE, "io.py")


def test_last_block_with_no_marker_after_it_closes_the_file_where_asked() -> None:
    result = apply_sketch(CLASS, APPENDED, path="version.py", options=FILE_END)
    assert result.applied, result.reason
    assert result.merged == CLASS + "    def __hash__(self):\n        return hash(self.major)\n"


def test_the_file_end_reading_is_off_by_default() -> None:
    _refused_as_a_tie(CLASS, APPENDED, "version.py")


@pytest.mark.parametrize(("original", "sketch", "path", "options"), [
    (TWO_FUNCTIONS, REWRITE, "io.py", REWRITES),
    (CLASS, APPENDED, "version.py", FILE_END),
], ids=["rewrite", "file end"])
def test_each_reading_decides_a_tie_the_structure_alone_leaves_open(
        monkeypatch: pytest.MonkeyPatch, original: str, sketch: str, path: str,
        options: ApplyOptions) -> None:
    monkeypatch.setattr(gap_search, "break_tie", lambda *args: None)
    _refused_as_a_tie(original, sketch, path, options)


def test_block_followed_by_a_marker_is_not_read_as_the_file_end() -> None:
    _refused_as_a_tie(CLASS, APPENDED + "    # ... existing code ...\n", "version.py", FILE_END)


def test_last_block_that_would_leave_code_after_it_is_not_read_as_the_file_end() -> None:
    # the file's last method follows the last blank line the block could start on
    closed = CLASS.rstrip("\n") + "\n"
    _refused_as_a_tie(closed, APPENDED, "version.py", FILE_END)


def test_the_specialist_takes_both_options_from_its_config() -> None:
    default = ApplySpecialist().apply_options
    assert (default.tie_rewrite, default.tie_file_end) == (False, False)
    configured = ApplySpecialist(tie_rewrite=True, tie_file_end=True).apply_options
    assert (configured.tie_rewrite, configured.tie_file_end) == (True, True)


def test_the_benchmark_measures_the_readings_where_asked(tmp_path: Path) -> None:
    # benchmarks/apply.py on one commit that rewrites the line in ``save``: its sketches
    # with one line of context tie between ``load`` and ``save``; --tie-rewrite answers them
    history = tmp_path / "h.jsonl.gz"
    with gzip.open(history, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"commit": "c0", "path": "io.py", "language": "python",
                              "before": TWO_FUNCTIONS,
                              "after": TWO_FUNCTIONS.replace('mode="a"', 'mode="w"')}) + "\n")
    exact = {}
    for flags in ((), ("--tie-rewrite", "--tie-file-end")):
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "apply.py"), str(history),
                               "--generator", "lines", *flags], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        lines = summary["by_generator"]["lines"]
        exact[flags] = (lines["exact"], lines["silent_wrong"])
    assert exact[()][1] == 0 and exact[("--tie-rewrite", "--tie-file-end")][1] == 0
    assert exact[("--tie-rewrite", "--tie-file-end")][0] > exact[()][0]
