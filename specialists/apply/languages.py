"""Per-language facts the applier needs: file extensions, comment syntax, definition headers.

Kept as plain tables so adding a language is one row each. Marker detection accepts every
comment syntax below whatever the language, because a sketch's marker is recognised by its
wording (``... existing code ...``) and a ``#`` marker in a JavaScript file is still a
marker; the language's own syntax is what the generator writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import repeat
from typing import Iterable

__all__ = [
    "BRACE_LANGUAGES", "CommentSyntax", "bracket_net", "bracket_steps", "closing_line",
    "comment_syntax", "definition_end", "definition_name", "definition_start",
    "definitions_of", "language_for_path",
]

_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".kt": "kotlin", ".swift": "swift", ".scala": "scala", ".php": "php",
    ".rb": "ruby", ".sh": "shell", ".bash": "shell", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".lua": "lua", ".sql": "sql", ".hs": "haskell",
    ".html": "html", ".xml": "xml", ".vue": "html", ".css": "css", ".scss": "css",
}

_HASH = {"python", "ruby", "shell", "yaml", "toml"}
_DASH = {"lua", "sql", "haskell"}
_ANGLE = {"html", "xml"}
_BLOCK_ONLY = {"css"}


@dataclass(frozen=True)
class CommentSyntax:
    """How the language writes a one-line comment: ``prefix text suffix``."""

    prefix: str
    suffix: str = ""

    def wrap(self, text: str) -> str:
        return f"{self.prefix} {text}{' ' + self.suffix if self.suffix else ''}"


def language_for_path(path: str | None) -> str | None:
    """The language name for a file path by its extension, or ``None`` when unknown."""
    if not path:
        return None
    dot = path.rfind(".")
    return _EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


def comment_syntax(language: str | None) -> CommentSyntax:
    """The line-comment syntax a sketch in ``language`` uses for its markers."""
    if language in _HASH:
        return CommentSyntax("#")
    if language in _DASH:
        return CommentSyntax("--")
    if language in _ANGLE:
        return CommentSyntax("<!--", "-->")
    if language in _BLOCK_ONLY:
        return CommentSyntax("/*", "*/")
    return CommentSyntax("//")


# A definition header and the name it defines, by language family. The applier uses these
# cheap patterns to say which definition a sketch block is about; tree-sitter gives spans.
_DEF_PATTERNS: dict[str, re.Pattern[str]] = {
    "python": re.compile(r"^(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)"),
    "go": re.compile(r"^(func|type)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)"),
    "rust": re.compile(
        r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(fn|struct|enum|trait|mod|impl)\s+([A-Za-z_]\w*)"
    ),
    "c_like": re.compile(
        r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?(function\*?|class|interface|enum|type)\s+([A-Za-z_$][\w$]*)"
    ),
    "method": re.compile(
        r"^(?:(?:public|private|protected|static|final|abstract|synchronized|async|override|get|set)\s+)*"
        r"(?:[\w<>\[\],.?]+\s+)?([A-Za-z_$][\w$]*)\s*\([^;]*\)\s*(?:throws [\w., ]+)?\s*\{\s*$"
    ),
    # a function assigned to a member: ``res.send = function send(body) {``,
    # ``Router.prototype.use = function(fn) {``, ``exports.parse = async function``
    "member": re.compile(
        r"^(?:[A-Za-z_$][\w$]*\.)+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?function\b"
    ),
    "binding": re.compile(
        r"^(?:export\s+)?(const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?(?:function|\(|[A-Za-z_$][\w$]*\s*=>)"
    ),
}
_ONE_PATTERN = {"python", "go", "rust"}
_NOT_METHOD_NAMES = {"if", "for", "while", "switch", "catch", "return", "function", "else", "with"}


def definition_name(stripped_line: str, language: str | None) -> tuple[str, str] | None:
    """``(kind, name)`` when the (stripped) line opens a definition, else ``None``."""
    if language == "python":
        m = _DEF_PATTERNS["python"].match(stripped_line)
        return (m.group(1), m.group(2)) if m else None
    if language == "go":
        m = _DEF_PATTERNS["go"].match(stripped_line)
        return (m.group(1), m.group(2)) if m else None
    if language == "rust":
        m = _DEF_PATTERNS["rust"].match(stripped_line)
        return (m.group(1), m.group(2)) if m else None
    for key in ("c_like", "binding"):
        m = _DEF_PATTERNS[key].match(stripped_line)
        if m:
            return ("function" if m.group(1).startswith("function") else m.group(1), m.group(2))
    if language in ("javascript", "typescript", "tsx"):
        m = _DEF_PATTERNS["member"].match(stripped_line)
        if m:
            return ("function", m.group(1))
    m = _DEF_PATTERNS["method"].match(stripped_line)
    if m and m.group(1) not in _NOT_METHOD_NAMES:
        return ("method", m.group(1))
    return None


def definitions_of(keys: Iterable[str], language: str | None) -> set[tuple[str, str]]:
    """``(kind, name)`` of every definition these (stripped) lines open."""
    if language in _ONE_PATTERN:  # ``definition_name`` is one pattern's two groups there
        match = _DEF_PATTERNS[language].match  # type: ignore[index]
        return {(m[1], m[2]) for m in filter(None, map(match, filter(None, keys)))}
    # the other languages: ``definition_name``'s patterns, each run over every line by a C
    # loop; a line's first pattern that matches (in that order) names its definition
    keys = list(filter(None, keys))
    member = (map(_DEF_PATTERNS["member"].match, keys)
              if language in ("javascript", "typescript", "tsx") else repeat(None))
    out: set[tuple[str, str]] = set()
    for c_like, binding, assigned, method in filter(any, zip(
            map(_DEF_PATTERNS["c_like"].match, keys), map(_DEF_PATTERNS["binding"].match, keys),
            member, map(_DEF_PATTERNS["method"].match, keys))):
        m = c_like or binding
        if m:
            out.add(("function" if m.group(1).startswith("function") else m.group(1), m.group(2)))
        elif assigned:
            out.add(("function", assigned.group(1)))
        elif method and method.group(1) not in _NOT_METHOD_NAMES:
            out.add(("method", method.group(1)))
    return out


def definition_start(keys: list[str], widths: list[int], header: int, lo: int = 0) -> int:
    """The header's line, or the first decorator/annotation stacked right above it."""
    p = header
    while p - 1 >= lo and keys[p - 1].startswith("@") and widths[p - 1] == widths[header]:
        p -= 1
    return p


BRACE_LANGUAGES = frozenset({"javascript", "typescript", "tsx", "go", "rust", "java", "c",
                             "cpp", "csharp", "kotlin", "swift", "scala", "php", "css"})
_OPENS, _CLOSES = "([{", ")]}"


def bracket_steps(key: str) -> tuple[int, int]:
    """(lowest, net) bracket depth along one stripped line of a brace language, from 0 at
    its start: ``} else {`` is (-1, 0), ``});`` (-2, -2). Brackets in string literals and
    comments are skipped (a string or comment running across lines is not followed, nor a
    regular expression literal); a line in a block comment (``*`` or ``/*``) counts as none."""
    if key.startswith(("*", "/*", "//")):
        return 0, 0
    depth = lowest = 0
    quote = ""
    i, n = 0, len(key)
    while i < n:
        c = key[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c == "/" and key[i + 1:i + 2] == "/":
            break
        elif c in _OPENS:
            depth += 1
        elif c in _CLOSES:
            depth -= 1
            lowest = min(lowest, depth)
        i += 1
    return lowest, depth


def bracket_net(keys: list[str], lo: int, hi: int) -> int:
    """How much lines lo..hi (stripped keys) change the bracket depth, all together."""
    return sum(bracket_steps(keys[i])[1] for i in range(lo, hi))


def closing_line(keys: list[str], start: int, stop: int, step: int) -> int | None:
    """Walking from ``start`` by ``step`` (1: down, -1: up) while it is not ``stop``, the
    first line that closes (down) or opens (up) a bracket left open across ``start - step``'s
    edge: the line that balances it. ``None`` if there is none before ``stop``."""
    depth = 0
    j = start
    while j != stop:
        lowest, net = bracket_steps(keys[j])
        if step < 0:  # read backwards, closers open and openers close
            lowest, net = lowest - net, -net
        if depth + lowest < 0:
            return j
        depth += net
        j += step
    return None


def definition_end(keys: list[str], widths: list[int], header: int, hi: int,
                   language: str | None) -> int:
    """One past the last line of the definition opened on line ``header`` (stripped keys).

    Python: the indented body (blank lines inside kept, trailing ones not). Brace languages:
    up to the brace that balances the first one opened (strings and comments not parsed, so
    a brace in a string can end it early; the applier only uses this where it then checks).
    """
    if language == "python":
        end = header + 1
        width = widths[header]
        while end < hi and (not keys[end] or widths[end] > width or keys[end][:1] in ")]}"):
            end += 1
        while end - 1 > header and not keys[end - 1]:
            end -= 1
        return end
    if "{" not in keys[header]:
        # A one-line declaration (``type F func() error``) has no body; a signature that
        # goes on (``func f(``) continues on deeper lines.
        q = header + 1
        while q < hi and not keys[q]:
            q += 1
        if q >= hi or (widths[q] <= widths[header] and not keys[q].startswith("{")):
            return header + 1
    depth = 0
    opened = False
    for q in range(header, hi):
        line = keys[q]
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if opened and depth <= 0:
            return q + 1
    return header + 1
