"""Line handling shared by the applier and the sketch generator: split, keys, indentation.

Lines are kept without their ``\\n``; a CRLF file keeps its ``\\r`` on each line so that kept
lines come back byte for byte. Matching uses the stripped line as the key, so tabs vs
spaces, trailing whitespace and a uniform indentation shift do not stop a match.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import repeat
from operator import add, mul, sub

__all__ = ["Lines", "indent_of", "indent_width", "indent_widths", "reindent", "split_lines"]

TAB_WIDTH = 4


@dataclass
class Lines:
    """A text split into lines, with what it takes to join it back exactly."""

    raw: list[str]  # each line without "\n" (a CRLF line keeps its "\r")
    keys: list[str]  # each line stripped: the matching key
    final_newline: bool
    crlf: bool  # most lines end in "\r\n"
    indent_char: str  # "\t" or " ": what most indented lines start with

    def join(self, raw: list[str], final_newline: bool | None = None) -> str:
        end = self.final_newline if final_newline is None else final_newline
        if not raw:
            return ""
        return "\n".join(raw) + ("\n" if end else "")


def split_lines(text: str) -> Lines:
    raw = text.split("\n")
    final_newline = text.endswith("\n")
    if final_newline or raw == [""]:
        raw.pop()
    crs = text.count("\r\n") + text.endswith("\r")  # lines that end in "\r"
    tabs, spaces = _leading_tabs_spaces(text, raw[:400])
    return Lines(
        raw=raw,
        keys=list(map(str.strip, raw)),
        final_newline=final_newline,
        crlf=bool(raw) and crs * 2 > len(raw),
        indent_char="\t" if tabs > spaces else " ",
    )


def _leading_tabs_spaces(text: str, head: list[str]) -> tuple[int, int]:
    """How many of ``head`` (the first lines of ``text``) start with a tab, with a space:
    the first line, and each later one right after a newline before the end of the last
    (counted in the text, not line by line)."""
    if not head:
        return 0, 0
    end = sum(map(len, head)) + len(head) - 1
    return (text.startswith("\t") + text.count("\n\t", 0, end),
            text.startswith(" ") + text.count("\n ", 0, end))


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_width(line: str) -> int:
    """Columns of leading whitespace, a tab counting ``TAB_WIDTH``."""
    lead = len(line) - len(line.lstrip(" \t"))
    if not lead:
        return 0
    return lead + (TAB_WIDTH - 1) * line.count("\t", 0, lead)


def indent_widths(lines: list[str]) -> list[int]:
    """``indent_width`` of every line, without a Python call per line where no line is
    indented with tabs."""
    widths = list(map(sub, map(len, lines), map(len, map(str.lstrip, lines, repeat(" \t")))))
    if "\t" in "".join(lines):  # each tab in the indentation counts TAB_WIDTH columns
        tabs = map(str.count, lines, repeat("\t"), repeat(0), widths)
        widths = list(map(add, widths, map(mul, tabs, repeat(TAB_WIDTH - 1))))
    return widths


def reindent(line: str, width: int, indent_char: str) -> str:
    """``line`` with its leading whitespace replaced by ``width`` columns in ``indent_char``."""
    body = line.lstrip(" \t")
    width = max(width, 0)
    if indent_char == "\t":
        return "\t" * (width // TAB_WIDTH) + " " * (width % TAB_WIDTH) + body
    return " " * width + body


def _fence_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith("```")]


# A first line that names the file rather than belonging to it: "// filepath: src/app.js"
# (the convention of VS Code's Copilot edits), "# File: app.py", "<!-- path: index.html -->".
_PATH_HEADER = re.compile(
    r"^(?:#+|//+|--|/\*+|<!--)\s*(?P<label>(?:file\s*(?:path|name)?|path)\s*:\s*)?"
    r"`?(?P<path>[\w@~./\\-]+\.\w+)`?\s*(?:\*+/|-->)?$", re.I)


def _path_header(line: str, original: str, path: str | None) -> bool:
    """Whether ``line`` (a sketch's first) is a comment naming the file the sketch is for:
    the request's own file (its name, or a path ending in it), or any path after a
    ``filepath:`` label; never a line the original has (a file whose header names itself),
    and into an empty original only with the label (a new file may start with its name)."""
    m = _PATH_HEADER.match(line.strip())
    if not m or line.strip() in {o.strip() for o in original.split("\n")[:50]}:
        return False
    if m.group("label"):
        return True
    if not original.strip() or not path:
        return False
    return names_path(m.group("path"), path)


def names_path(named: str, path: str) -> bool:
    """Whether ``named`` (a path an answer writes: ``app.py``, ``./src/app.py``,
    ``src\\app.py``) is the file at ``path``: the same path, or one ends in the other."""
    named = named.replace("\\", "/").lstrip("./")
    own = path.replace("\\", "/")
    return bool(named) and (own == named or own.endswith("/" + named)
                            or named.endswith("/" + own))


def sketch_text(sketch: str, original: str, endings: bool = True,
                path: str | None = None) -> tuple[str, int]:
    """The sketch as the merge reads it, and how many of its first lines that drops.

    A chat answer often wraps the sketch in one Markdown code fence, with a sentence before
    or after it ("Here is the change:"): then the fenced lines alone are the sketch. Only
    for exactly one fenced block, and never where the original has either fence line
    itself (a Markdown file, a docstring showing code), where the fences may be the file's.
    A first line that only names the file (``// filepath: src/app.js``, ``# app.py``; see
    ``_path_header``) is dropped too. With ``endings``, every line ends in ``\n`` alone:
    the merged file keeps the original's line endings, and new lines take them, whatever
    the sketch's were.
    """
    text = sketch.replace("\r\n", "\n") if endings else sketch
    text, dropped = _unfenced(text, original, endings)
    head = text[:300].split("\n")
    first = next((i for i, line in enumerate(head[:-1]) if line.strip()), None)
    if first is not None and _path_header(head[first], original, path):
        cut = sum(len(line) + 1 for line in head[:first + 1])
        text, dropped = text[cut:], dropped + first + 1
    return _unnumbered(text, original), dropped


# A line number copied from a numbered view of the file: "   12\t" (cat -n), "   12→"
# (an agent's file reader), "12: ", "12 | ", "L12: ". One separator is taken; the code's
# own indentation after it stays.
_NUMBERED = re.compile(r"^ *(?P<l>L?)(?P<n>\d{1,6})(?:(?P<sep>\t|→| ?\| ?|: |:\t)|:?$)")


def _unnumbered(text: str, original: str) -> str:
    """``text`` without line-number prefixes, where a model copied them from a numbered view
    of the file (agents' file readers number their lines, and models echo them into edits):
    only when at least two thirds of the sketch's lines with text (markers aside) carry
    one, lines the original does not have verbatim, the numbers mostly rise (three pairs in
    four) and some of the lines, unnumbered, are lines of the original (the view was
    copied from it; half of them in the ``12: `` form, which a dict's lines share). Lines
    without a number (a marker the model wrote fresh) stay as they are."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if not any(_NUMBERED.match(lines[i]) for i in filled[:6]):
        return text  # the common case, decided on the first lines
    own = set(original.split("\n"))
    numbered = [(i, m) for i in filled
                if (m := _NUMBERED.match(lines[i])) and lines[i] not in own]
    # a bare number (a numbered blank line) is stripped with the rest but never decides
    bare = {i for i, m in numbered if not m.group("sep")}
    plain = {i for i in filled if "..." not in lines[i] and "…" not in lines[i]} - bare
    with_code = sum(1 for i, m in numbered if i in plain)
    if with_code < 2 or 3 * with_code < 2 * len(plain):
        return text
    values = [int(m.group("n")) for _, m in numbered]
    rising = sum(b > a for a, b in zip(values, values[1:]))
    if 4 * rising < 3 * (len(values) - 1):
        return text
    if not _from_a_view(lines, [(i, m) for i, m in numbered if i in plain], original):
        return text
    for i, m in numbered:
        lines[i] = lines[i][m.end():]
    return "\n".join(lines)


def _from_a_view(lines: list[str], numbered: list[tuple[int, re.Match[str]]],
                 original: str) -> bool:
    """Whether the numbered code lines look copied from a numbered view of ``original``.
    A copied view holds some of the file's own lines, once unnumbered (a sketch that only
    adds lines shows none, and is read as it is: a numbered listing in a document looks
    the same). ``200: ok`` is also a dict's or a YAML map's line: with that form, half the
    lines must be the file's, or two of them must sit where their numbers say (one shift
    for all, as in a view numbered after an earlier insertion)."""
    where: dict[str, list[int]] = defaultdict(list)
    for n, line in enumerate(original.split("\n"), 1):
        where[line.strip()].append(n)
    found = 0
    shifts: Counter[int] = Counter()
    colon = 0
    for i, m in numbered:
        if m.group("sep")[:1] == ":" and not m.group("l"):
            colon += 1
        body = lines[i][m.end():].strip()
        at = where.get(body)
        if at:
            found += 1
            if len(body) > 3:  # a "}" or "pass" sits in many places
                shifts.update({int(m.group("n")) - n for n in at})
    if found == 0:
        return False
    if 2 * colon <= len(numbered):
        return True
    return 2 * found >= len(numbered) or max(shifts.values(), default=0) >= 2


# Fence tags that name what a code block is written in: a block in another language than
# the file's (a shell command beside the code, say) is not part of its sketch.
_TAG_LANGUAGES = {
    "python": "python", "py": "python", "python3": "python",
    "javascript": "javascript", "js": "javascript", "jsx": "javascript", "mjs": "javascript",
    "node": "javascript", "typescript": "typescript", "ts": "typescript",
    "tsx": "typescript", "go": "go", "golang": "go", "rust": "rust", "rs": "rust",
    "java": "java", "ruby": "ruby", "rb": "ruby", "c": "c", "cpp": "cpp", "c++": "cpp",
    "bash": "shell", "sh": "shell", "shell": "shell", "zsh": "shell", "console": "shell",
    "terminal": "shell", "powershell": "shell", "ps1": "shell", "cmd": "shell",
}


def _answer_fences(lines: list[str], fences: list[int], original: str) -> bool:
    """Whether the fence lines (paired in order) wrap a chat answer's code rather than
    belong to the file: the original holds none of them itself (a Markdown file, a
    docstring showing code), and the lines outside the fenced blocks are prose, none of
    them a line of the original or a marker (a sketch of a Markdown file that adds code
    blocks has the file's own lines, or its markers, around them, and is read as it is)."""
    from specialists.apply.markers import LineKind, classify

    own_fences = {line.rstrip("\r ") for line in original.split("\n") if line.startswith("```")}
    if own_fences & {lines[i].rstrip("\r ") for i in fences}:
        return False
    inside = set()
    for first, last in zip(fences[::2], fences[1::2]):
        inside.update(range(first, last + 1))
    outside = [line.strip() for i, line in enumerate(lines) if i not in inside and line.strip()]
    if not outside:
        return True
    own = {line.strip() for line in original.split("\n")}
    return not any(line in own or classify(line)[0] != LineKind.CODE for line in outside)


def fenced_parts(text: str, original: str, language: str | None) -> list[tuple[str, int]]:
    """The code blocks of a chat answer that shows the change in two or more fences (prose
    between them: "First the import: ... Then the function: ..."), each as (its text, the
    number of the answer's lines before it), in order; a block tagged with another language
    than the file's is left out. Empty where the answer has fewer than two fenced blocks,
    or its fences are the file's (``_answer_fences``)."""
    if text.count("```") < 4:
        return []
    lines = text.split("\n")
    fences = _fence_lines(lines)
    if len(fences) < 4 or len(fences) % 2:
        return []
    if not _answer_fences(lines, fences, original):
        return []
    parts = []
    for first, last in zip(fences[::2], fences[1::2]):
        words = lines[first][3:].strip().lower().split()
        tagged = _TAG_LANGUAGES.get(words[0]) if words else None
        if tagged is not None and language is not None and tagged != language and not (
                {tagged, language} <= {"javascript", "typescript"}):
            continue
        parts.append(("".join(line + "\n" for line in lines[first + 1:last]), first + 1))
    return parts


def _unfenced(text: str, original: str, endings: bool) -> tuple[str, int]:
    if "```" not in text:
        return text, 0
    lines = text.split("\n")
    fences = _fence_lines(lines)
    if len(fences) != 2:
        return text, 0
    first, last = fences
    if not _answer_fences(lines, fences, original):
        return text, 0  # the file's own fences, or a document's sketch adding a code block
    body = lines[first + 1:last]
    if not endings and lines[first].endswith("\r"):  # a CRLF sketch kept as it is
        return "".join(line.removesuffix("\r") + "\r\n" for line in body), first + 1
    return "".join(line + "\n" for line in body), first + 1
