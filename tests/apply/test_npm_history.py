"""``benchmarks/npm_history.py``: real JavaScript edits from consecutive npm releases, as a
development set in the shared histories' format (issue 36). Run here with ``--offline`` on
tarballs built in the test, so nothing touches the network; then the applier benchmark reads
what it wrote."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "npm_history.py"

SOURCE = """'use strict';

function total(items) {
  let sum = 0;
  for (const item of items) {
    sum += item.price;
  }
  return sum;
}

function count(items) {
  return items.length;
}

module.exports = { total, count };
"""
HEADER = "// version 1.0.0\nexports.name = 'left';\n"


def _release(folder: Path, version: str, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"{version}.tgz", "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_consecutive_releases_become_edits_of_commit_size(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    changed = SOURCE.replace("sum += item.price;", "sum += item.price * item.quantity;")
    rewritten = "\n".join(f"const v{i} = {i};" for i in range(40)) + "\n"
    sparse = rewritten.replace("v5 = 5", "v5 = 50").replace("v20 = 20", "v20 = 21").replace(
        "v35 = 35", "v35 = 0")
    _release(cache / "pkg", "1.0.0", {
        "lib/total.js": SOURCE, "lib/a.js": HEADER, "lib/b.js": HEADER + "exports.b = 1;\n",
        "dist/total.js": SOURCE, "lib/min.js": "x=" + "1+" * 300 + "1;\n",
        "lib/many.js": rewritten, "README.md": "# pkg\n"})
    _release(cache / "pkg", "1.0.1", {
        "lib/total.js": changed, "lib/a.js": HEADER.replace("1.0.0", "1.0.1"),
        "lib/b.js": HEADER.replace("1.0.0", "1.0.1") + "exports.b = 1;\n",
        "dist/total.js": changed, "lib/min.js": "x=" + "1+" * 300 + "2;\n",
        "lib/many.js": sparse, "README.md": "# pkg!\n"})
    _release(cache / "pkg", "1.1.0-beta.1", {"lib/total.js": SOURCE})
    out = tmp_path / "out"
    done = _run("pkg", "--offline", "--cache", str(cache), "--out", str(out), "--max-hunks", "2")
    assert done.returncode == 0, done.stderr
    with gzip.open(out / "npm-pkg.jsonl.gz", "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    # dist/ is built code, min.js has a minified line, README is not JavaScript, the
    # pre-release is skipped; the version bump is one change made to two files alike and is
    # kept once; many.js changes in three hunks, over --max-hunks.
    assert sorted(row["path"] for row in rows) == ["lib/a.js", "lib/total.js"]
    total = next(row for row in rows if row["path"] == "lib/total.js")
    assert (total["before"], total["after"]) == (SOURCE, changed)
    assert total["repo"] == "npm:pkg" and total["commit"] == "1.0.0..1.0.1"
    assert total["language"] == "javascript" and total["hunks"] == 1

    # The applier benchmark reads the folder as it reads a project's history.
    bench = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "apply.py"), str(out),
                            "--generator", "lines"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert bench.returncode == 0, bench.stderr
    summary = json.loads(bench.stdout.strip().splitlines()[-1])
    assert summary["by_generator"]["lines"]["n"] > 0


def test_offline_without_a_cache_says_what_to_do_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run("nothere", "--offline", "--cache", str(tmp_path / "cache"), "--out", str(out))
    assert done.returncode != 0
    assert "run once without --offline" in done.stderr
    assert not out.exists()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    done = _run("pkg", "--pairs", "0", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "--pairs and --max-hunks must be at least 1" in done.stderr
