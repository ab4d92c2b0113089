"""Synthetic commits on real source files, for developing the applier in a language the
shared commit histories hold only in held-out projects (issue 36).

The shared data's development projects are all Python; JavaScript and Go are only in the
held-out ones (express, cobra). This writes a development set in another language from
real files that have nothing to do with those projects (for example npm's own sources under
``/usr/lib/node_modules/npm``): each row is one file and an edit of it shaped like the
edits commits make — a line changed, lines added beside a similar one, lines deleted, a
whole definition deleted, a new definition added after one it resembles, or two of these in
different places. The rows have the shared histories' fields (``before``, ``after``,
``language``, ``path``, ``repo``), so ``benchmarks/apply.py`` reads the file as it reads a
project's history. The edits are made up; the code around them is real.

    python benchmarks/synth_commits.py SRC... --language javascript --out runs/synth_js.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specialists.apply.languages import definition_end, definition_name  # noqa: E402
from specialists.apply.text import indent_widths  # noqa: E402

SUFFIXES = {"javascript": (".js", ".mjs", ".cjs"), "go": (".go",), "python": (".py",),
            "typescript": (".ts",)}
KINDS = ("change", "insert", "delete", "delete_def", "add_def")
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
_STRING = re.compile(r"'([^'\\\n]{2,})'|\"([^\"\\\n]{2,})\"")
_IDENT = re.compile(r"\b([a-z][A-Za-z0-9]{3,})\b")
_KEYWORDS = {"function", "return", "const", "this", "async", "await", "typeof", "null",
             "true", "false", "else", "while", "throw", "break", "continue", "require",
             "module", "exports", "undefined", "case", "default", "switch", "instanceof",
             "new", "delete", "void", "yield", "static", "class", "extends", "super",
             "import", "from", "export", "package", "func", "type", "struct", "interface",
             "range", "defer", "chan", "select", "string", "error", "self", "None", "True",
             "False", "elif", "pass", "lambda", "with", "assert", "raise"}


def definitions(lines: list[str], language: str) -> list[tuple[int, int]]:
    """(header, end) of every definition with a body of 2 to 80 lines."""
    keys = [line.strip() for line in lines]
    widths = indent_widths(lines)
    out = []
    for h, key in enumerate(keys):
        if key and definition_name(key, language):
            end = definition_end(keys, widths, h, len(keys), language)
            if 3 <= end - h <= 82:
                out.append((h, end))
    return out


def mutate(line: str, rng: random.Random) -> str | None:
    """The line with one token changed (a number, a string's text, an identifier), or
    ``None`` when it has none to change."""
    options = []
    for m in _NUMBER.finditer(line):
        options.append((m.start(), m.end(), str(int(m.group()) + rng.randint(1, 9))))
    for m in _STRING.finditer(line):
        g = 1 if m.group(1) is not None else 2
        text = m.group(g)
        options.append((m.start(g), m.end(g), text + rng.choice(("_v2", " (new)", "X", "s"))))
    for m in _IDENT.finditer(line):
        if m.group(1) not in _KEYWORDS:
            options.append((m.start(1), m.end(1),
                            m.group(1) + rng.choice(("Next", "2", "Count", "Value", "Old"))))
    if not options:
        return None
    start, end, new = rng.choice(options)
    return line[:start] + new + line[end:]


def _balanced(lines: list[str]) -> bool:
    text = "".join(lines)
    return all(text.count(a) == text.count(b) for a, b in ("{}", "()", "[]"))


def _body_lines(lines: list[str], h: int, end: int) -> list[int]:
    """Lines inside the definition (not its header or closing line) with text that is more
    than a bracket."""
    return [i for i in range(h + 1, end - 1)
            if lines[i].strip() and lines[i].strip().strip("{}()[];,") != ""]


def edit_once(lines: list[str], language: str, kind: str,
              rng: random.Random) -> list[str] | None:
    """``lines`` with one edit of ``kind``, or ``None`` when this file offers none."""
    defs = definitions(lines, language)
    if not defs:
        return None
    h, end = rng.choice(defs)
    body = _body_lines(lines, h, end)
    if kind == "change" and body:
        i = rng.choice(body)
        new = mutate(lines[i], rng)
        return None if new is None else lines[:i] + [new] + lines[i + 1:]
    if kind == "insert" and body:
        i = rng.choice(body)
        if not _balanced([lines[i]]):
            return None
        added = [m for m in (mutate(lines[i], rng) for _ in range(rng.randint(1, 3))) if m]
        return lines[:i + 1] + added + lines[i + 1:] if added else None
    if kind == "delete" and body:
        i = rng.choice(body)
        n = rng.randint(1, 3)
        run = lines[i:i + n]
        if i + n > end - 1 or not _balanced(run):
            return None
        return lines[:i] + lines[i + n:]
    if kind == "delete_def":
        stop = end + 1 if end < len(lines) and not lines[end].strip() else end
        return lines[:h] + lines[stop:]
    if kind == "add_def":
        block = list(lines[h:end])
        name = definition_name(block[0].strip(), language)
        if not name:
            return None
        fresh = name[1] + rng.choice(("Sync", "Async", "Next", "All", "Once"))
        block[0] = re.sub(rf"\b{re.escape(name[1])}\b", fresh, block[0], count=1)
        inner = _body_lines(block, 0, len(block))
        if inner:
            i = rng.choice(inner)
            block[i] = mutate(block[i], rng) or block[i]
        return lines[:end] + [""] + block + lines[end:]
    return None


def synth(before: str, language: str, rng: random.Random) -> str | None:
    """An edited copy of ``before``: one edit, or (three times in ten) two."""
    lines = before.split("\n")
    out = None
    for _ in range(2 if rng.random() < 0.3 else 1):
        for _attempt in range(8):
            done = edit_once(out or lines, language, rng.choice(KINDS), rng)
            if done is not None and done != (out or lines):
                out = done
                break
    return None if out is None else "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", nargs="+", type=Path, help="files or folders of real source files")
    p.add_argument("--language", required=True, choices=sorted(SUFFIXES))
    p.add_argument("--out", type=Path, required=True, help="a .jsonl.gz to write")
    p.add_argument("--per-file", type=int, default=2, help="edits made of each file")
    p.add_argument("--max-lines", type=int, default=1500, help="skip longer files")
    p.add_argument("--exclude", action="append", default=["dist", "test", "min.js"],
                   help="skip paths containing this (repeatable; default dist, test, min.js)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    files: list[Path] = []
    for item in a.src:
        if not item.exists():
            p.error(f"{item}: no such file or folder")
        found = [item] if item.is_file() else sorted(
            f for s in SUFFIXES[a.language] for f in item.rglob(f"*{s}"))
        files += [f for f in found if not any(x in str(f) for x in a.exclude)]
    rng = random.Random(a.seed)
    rows = 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_name(a.out.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        for f in files:
            try:
                before = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if not before.strip() or before.count("\n") > a.max_lines:
                continue
            for _ in range(a.per_file):
                after = synth(before, a.language, rng)
                if after is None or after == before:
                    continue
                handle.write(json.dumps({"before": before, "after": after,
                                         "language": a.language, "path": str(f),
                                         "repo": f"synth-{a.language}"}) + "\n")
                rows += 1
    tmp.replace(a.out)
    print(f"{rows} synthetic commits from {len(files)} files -> {a.out}")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
