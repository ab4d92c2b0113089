"""Edit histories from any source tree, for benchmarks on code no step of training saw.

    python benchmarks/make_histories.py SRC_DIR --name NAME --out DIR [--pairs 200]
        [--seed 0] [--max-lines 0] [--largest 1]

``../shared/data/commits`` holds real edits mined from eight projects' git histories, and
every one of them has been used for training, tuning or evaluation. To measure on projects
no step has seen (issue 34: "any folder of histories"), this writes ``DIR/NAME.jsonl.gz`` in
the same format (``specialists.tab.data`` reads it) from a source tree that has no history
here, such as a package installed in the virtual environment (SQLAlchemy, pydantic, Jinja —
none is in the training data).

What the edits are, honestly: each pair's ``after`` is a real file as its authors wrote it;
its ``before`` is the same file with 1 to 3 blocks of 1 to 4 consecutive non-blank lines
removed, so a simulated person replaying the pair types those lines back in, a character at
a time, at their real place in real code. These are edits that *write new code*, not the
renames, fixes and moves of a real history: good for latency (the prompts, the files and
their sizes are real), an approximation for quality. ``commit`` is ``synthetic-retype``.

Files of any size are taken (``--max-lines`` 0: no limit), unlike the mined data (20 to
1,500 lines), so a benchmark meets the large files people open; ``--largest K`` makes sure
the K longest files are among the pairs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "tests", "test"}


def source_files(src: Path, max_lines: int) -> list[tuple[Path, int]]:
    """(path, line count) of every file of a known language under ``src``."""
    from specialists.tab.data import LANGUAGES

    out = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in LANGUAGES or not path.is_file() or path.is_symlink():
            continue
        if SKIP_DIRS & set(path.relative_to(src).parts[:-1]):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines = text.count("\n") + 1
        if lines >= 20 and (max_lines <= 0 or lines <= max_lines):
            out.append((path, lines))
    return out


def retype_pair(text: str, rng: random.Random) -> tuple[str, int] | None:
    """``text`` less 1-3 blocks of 1-4 consecutive non-blank lines, and how many blocks;
    None when the file has too few such lines."""
    lines = text.splitlines(keepends=True)
    blocks = rng.randint(1, 3)
    taken: set[int] = set()
    starts = [i for i, line in enumerate(lines) if line.strip()]
    rng.shuffle(starts)
    made = 0
    for start in starts:
        if made == blocks:
            break
        size = rng.randint(1, 4)
        block = range(start, min(len(lines), start + size))
        around = range(max(0, start - 2), min(len(lines), start + size + 2))
        if any(i in taken for i in around) or not all(lines[i].strip() for i in block):
            continue
        taken.update(block)
        made += 1
    if not made:
        return None
    return "".join(line for i, line in enumerate(lines) if i not in taken), made


def pairs(src: Path, name: str, count: int, seed: int, max_lines: int,
          largest: int) -> Iterator[dict[str, Any]]:
    from specialists.tab.data import LANGUAGES

    rng = random.Random(seed)
    files = source_files(src, max_lines)
    if not files:
        raise SystemExit(f"no source files of a known language under {src}")
    chosen = sorted(files, key=lambda f: -f[1])[:largest]
    rest = [f for f in files if f not in chosen]
    rng.shuffle(rest)
    chosen += rest[: max(0, count - len(chosen))]
    for path, _lines in chosen:
        after = path.read_text(encoding="utf-8")
        made = retype_pair(after, rng)
        if made is None:
            continue
        before, hunks = made
        rel = path.relative_to(src).as_posix()
        digest = hashlib.sha1(f"{name}:{rel}:{seed}".encode()).hexdigest()
        yield {"repo": name, "commit": digest, "parent": "synthetic-retype", "date": "",
               "message": f"retype {hunks} block(s) of {rel}", "path": rel,
               "language": LANGUAGES[path.suffix], "hunks": hunks,
               "before": before, "after": after}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path, help="a source tree (e.g. an installed package's folder)")
    ap.add_argument("--name", required=True, help="the project's name (the file is NAME.jsonl.gz)")
    ap.add_argument("--out", type=Path, required=True, help="the folder to write into")
    ap.add_argument("--pairs", type=int, default=200, help="files to take (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-lines", type=int, default=0, help="skip longer files (0: none)")
    ap.add_argument("--largest", type=int, default=1,
                    help="always take the K longest files (default 1)")
    a = ap.parse_args(argv)
    if not a.src.is_dir():
        ap.error(f"{a.src} is not a folder")
    a.out.mkdir(parents=True, exist_ok=True)
    target = a.out / f"{a.name}.jsonl.gz"
    tmp = target.with_suffix(".tmp")
    n, longest = 0, 0
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for row in pairs(a.src, a.name, a.pairs, a.seed, a.max_lines, a.largest):
            f.write(json.dumps(row) + "\n")
            n += 1
            longest = max(longest, row["after"].count("\n") + 1)
    tmp.replace(target)
    print(json.dumps({"out": str(target), "pairs": n, "longest_file_lines": longest}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
