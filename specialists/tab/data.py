"""Before/after edit pairs: load them, split them by project, mine them from any git repository.

The JSONL format is ``shared/data/README.md``'s: one object per line with ``repo``,
``commit``, ``parent``, ``date``, ``message``, ``path``, ``language``, ``hunks``, ``before``
and ``after``. ``complement data from-git PATH`` writes the same format from a local
repository, with the same filters, so a team can replay its own history.
"""

from __future__ import annotations

import difflib
import gzip
import json
import random
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["SPLIT", "split_projects", "Pair", "LANGUAGES", "language_of", "load_pairs", "load_split", "from_git",
           "write_pairs", "count_hunks"]

#: Split by project, never within one (DESIGN.md). Three Python projects are held out: one
#: for tuning thresholds (dev), two never seen by the LM, the policy or any tuned threshold
#: (test). Go and JavaScript stay in training so the model sees more than one language.
SPLIT: dict[str, tuple[str, ...]] = {
    "train": ("click", "flask", "rich", "cobra", "express"),
    "dev": ("attrs",),
    "test": ("httpx", "requests"),
}

LANGUAGES: dict[str, str] = {
    ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java",
}

VENDORED = ("vendor/", "node_modules/", "third_party/", "dist/", "build/", ".min.js", "_pb2.py",
            "generated", "package-lock.json")


@dataclass(frozen=True)
class Pair:
    """One real single-file edit."""

    repo: str
    path: str
    language: str
    before: str
    after: str
    commit: str = ""
    parent: str = ""
    date: str = ""
    message: str = ""
    hunks: int = 0

    @classmethod
    def from_json(cls, row: dict) -> "Pair":
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in fields})

    def to_json(self) -> dict:
        return asdict(self)


def language_of(path: str) -> str | None:
    return LANGUAGES.get(Path(path).suffix.lower())


def load_pairs(path: str | Path) -> Iterator[Pair]:
    """Read ``*.jsonl`` or ``*.jsonl.gz``."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield Pair.from_json(json.loads(line))


def split_projects(split: str) -> tuple[str, ...]:
    """The projects of a split name (:data:`SPLIT`) or of a comma-separated list of names."""
    if split in SPLIT:
        return SPLIT[split]
    names = tuple(name.strip() for name in split.split(",") if name.strip())
    if not names:
        raise ValueError(f"no projects in {split!r}: name a split ({', '.join(SPLIT)}) "
                         "or projects separated by commas")
    return names


def load_split(data_dir: str | Path, split: str, limit_per_project: int = 0,
               seed: int = 0) -> list[Pair]:
    """The pairs of one split (``train``/``dev``/``test``), or of the projects named
    (comma-separated: ``"httpx,requests"``), so that benchmarks run on any folder of
    ``NAME.jsonl.gz`` histories.

    ``limit_per_project`` samples that many pairs per project with ``seed`` (0: all).
    """
    projects = split_projects(split)
    pairs: list[Pair] = []
    for name in projects:
        path = Path(data_dir) / f"{name}.jsonl.gz"
        if not path.is_file():
            found = sorted(p.name[: -len(".jsonl.gz")] for p in Path(data_dir).glob("*.jsonl.gz"))
            raise FileNotFoundError(f"no history for project {name!r}: {path} does not exist "
                                    f"(projects in {data_dir}: {', '.join(found) or 'none'})")
        rows = list(load_pairs(path))
        if limit_per_project and len(rows) > limit_per_project:
            rows = random.Random(f"{seed}:{name}").sample(rows, limit_per_project)
        pairs.extend(rows)
    return pairs


def write_pairs(pairs: Iterable[Pair], out: str | Path) -> int:
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if p.suffix == ".gz" else open
    n = 0
    with opener(p, "wt", encoding="utf-8") as fh:
        for pair in pairs:
            fh.write(json.dumps(pair.to_json(), ensure_ascii=False) + "\n")
            n += 1
    return n


def count_hunks(before: str, after: str) -> int:
    """Changed regions of a line diff, as ``git diff -U0`` counts them."""
    sm = difflib.SequenceMatcher(None, before.splitlines(True), after.splitlines(True), autojunk=False)
    return sum(1 for op in sm.get_opcodes() if op[0] != "equal")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, encoding="utf-8", errors="replace").stdout


def _blob(repo: Path, rev: str, path: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True)
    if out.returncode != 0:
        return None
    try:
        return out.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _keep(before: str, after: str, min_lines: int, max_lines: int, max_bytes: int,
          max_hunks: int) -> int:
    """The hunk count if the pair passes the README's filters, else 0."""
    for text in (before, after):
        n = text.count("\n") + 1
        if not (min_lines <= n <= max_lines) or len(text.encode("utf-8")) > max_bytes or "\0" in text:
            return 0
    if "".join(before.split()) == "".join(after.split()):  # whitespace-only change
        return 0
    hunks = count_hunks(before, after)
    return hunks if 1 <= hunks <= max_hunks else 0


def from_git(repo: str | Path, name: str | None = None, max_pairs: int = 400, seed: int = 0,
             min_lines: int = 20, max_lines: int = 1500, max_bytes: int = 40_000,
             max_hunks: int = 8) -> list[Pair]:
    """Mine single-file modifications from a local repository's first-parent history.

    Same filters as ``shared/data``: non-merge commits, plain modifications of source files
    in a known language, 20–1,500 lines and at most 40 kB on both sides, 1–8 hunks, no
    whitespace-only changes and no vendored or generated files; at most ``max_pairs``
    sampled at random.
    """
    root = Path(repo)
    if not (root / ".git").exists() and not _git(root, "rev-parse", "--git-dir").strip():
        raise ValueError(f"{root} is not a git repository")
    name = name or root.resolve().name
    log = _git(root, "log", "--no-merges", "--diff-filter=M", "--name-only", "--format=\x1e%H %P")
    candidates: list[tuple[str, str, str]] = []
    for block in log.split("\x1e"):
        lines = [ln for ln in block.strip().splitlines() if ln.strip()]
        if not lines:
            continue
        head = lines[0].split()
        if len(head) < 2:
            continue  # a root commit has no parent to diff against
        for path in lines[1:]:
            if language_of(path) and not any(v in path for v in VENDORED):
                candidates.append((head[0], head[1], path))
    random.Random(seed).shuffle(candidates)
    pairs: list[Pair] = []
    for commit, parent, path in candidates:
        if len(pairs) >= max_pairs:
            break
        before, after = _blob(root, parent, path), _blob(root, commit, path)
        if before is None or after is None:
            continue
        hunks = _keep(before, after, min_lines, max_lines, max_bytes, max_hunks)
        if not hunks:
            continue
        date, _, message = _git(root, "show", "-s", "--format=%aI%x00%B", commit).partition("\x00")
        pairs.append(Pair(repo=name, path=path, language=language_of(path) or "", before=before,
                          after=after, commit=commit, parent=parent, date=date.strip(),
                          message=message.strip(), hunks=hunks))
    return pairs
