"""Which names a file's imports bind and whether the file's code still uses them: what
decides a sketch that opens below import lines it does not show, with no marker above.

Such a sketch reads two ways: it starts the file, deleting the imports above its first line
(frontier models leave out the first marker there), or its writer forgot the marker and
the imports stay. The lines of the sketch do not say which; the code does. A reading that
deletes an import whose name the file still uses leaves that name unbound: the other
reading is meant. A reading that keeps imports whose every name the change took the last
use of keeps dead imports, where the writer who started the file dropped them.

``head_choice`` compares the two readings' files; the names come from Python's ``ast``
(a file that does not parse gives no decision), and for JavaScript/TypeScript and Go from
their import and ``require`` forms. Imports only this module reads; it imports nothing of
the applier.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

__all__ = ["Imports", "head_choice", "imports_of"]

_JS_IMPORT = re.compile(r"""^\s*import\s+(?P<what>.+?)\s+from\s+['"][^'"]+['"]\s*;?\s*$""")
_JS_SIDE = re.compile(r"""^\s*import\s+['"][^'"]+['"]\s*;?\s*$""")
_JS_REQUIRE = re.compile(
    r"""^\s*(?:const|let|var)\s+(?P<what>[\w$]+|\{[^}]*\})\s*=\s*require\(\s*['"][^'"]+['"]\s*\)"""
    r"""(?:\.[\w$]+)*\s*[;,]?\s*$""")
_GO_SPEC = re.compile(r"""^\s*(?:import\s+)?(?:(?P<alias>[\w.]+)\s+)?"(?P<path>[^"]+)"\s*$""")
_NAME = r"[A-Za-z_$][\w$]*"


class Imports:
    """A file's import statements: the lines they take, the names they bind, and whether
    every one was understood (a star import, a side-effect import or a form not read here
    leaves ``complete`` false)."""

    def __init__(self) -> None:
        self.lines: set[int] = set()
        self.names: dict[int, set[str]] = {}  # first line of each statement -> its names
        self.complete = True

    def bound(self) -> set[str]:
        return set().union(*self.names.values()) if self.names else set()


def imports_of(lines: Sequence[str], language: str | None) -> Imports | None:
    """The import statements of ``lines`` (a whole file); ``None`` where the language is
    not read here or a Python file does not parse."""
    if language == "python":
        return _python(lines)
    if language in ("javascript", "typescript"):
        return _javascript(lines)
    if language == "go":
        return _go(lines)
    return None


def _python(lines: Sequence[str]) -> Imports | None:
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None
    found = Imports()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        found.lines.update(range(start, end + 1))
        names: set[str] = set()
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            found.complete = False  # binds nothing the code names, yet changes it
        for alias in node.names:
            if alias.name == "*":
                found.complete = False
            elif alias.asname:
                names.add(alias.asname)
            elif isinstance(node, ast.Import):
                names.add(alias.name.split(".")[0])
            else:
                names.add(alias.name)
        found.names[start] = names
    return found


def _js_names(what: str) -> set[str] | None:
    names: set[str] = set()
    for part in re.split(r",(?![^{]*\})", what):
        part = part.strip()
        if not part:
            continue
        if part.startswith("{"):
            for item in part.strip("{} ").split(","):
                item = item.strip()
                if not item:
                    continue
                bits = re.split(r"\s+as\s+|\s*:\s*", item)
                name = bits[-1].strip()
                if not re.fullmatch(_NAME, name):
                    return None
                names.add(name)
        elif part.startswith("*"):
            bits = part.split()
            if len(bits) != 3 or bits[1] != "as" or not re.fullmatch(_NAME, bits[2]):
                return None
            names.add(bits[2])
        elif re.fullmatch(_NAME, part):
            names.add(part)
        else:
            return None
    return names


def _javascript(lines: Sequence[str]) -> Imports:
    found = Imports()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not (stripped.startswith("import") or "require(" in stripped):
            continue
        match = _JS_IMPORT.match(line) or _JS_REQUIRE.match(line)
        if match:
            names = _js_names(match.group("what"))
            if names is None:
                found.complete = False
                names = set()
            found.lines.add(i)
            found.names[i] = names
        elif _JS_SIDE.match(line):
            found.lines.add(i)
            found.names[i] = set()
            found.complete = False
        elif stripped.startswith("import ") or stripped.startswith("import{"):
            found.complete = False  # an import over several lines: not read here
    return found


def _go(lines: Sequence[str]) -> Imports:
    found = Imports()
    in_block = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if in_block:
            found.lines.add(i)
            if stripped == ")":
                in_block = False
                continue
            if not stripped or stripped.startswith("//"):
                continue
            _go_spec(found, i, stripped)
            continue
        if stripped.startswith("import ("):
            in_block = True
            found.lines.add(i)
            continue
        if stripped.startswith("import "):
            found.lines.add(i)
            _go_spec(found, i, stripped)
    return found


def _go_spec(found: Imports, i: int, text: str) -> None:
    match = _GO_SPEC.match(text)
    if not match:
        found.complete = False
        return
    alias = match.group("alias")
    if alias in ("_", "."):
        found.complete = False  # imported for its side effects, or into the file's scope
        found.names[i] = set()
        return
    path = match.group("path").rstrip("/")
    name = alias or path.split("/")[-1]
    if re.fullmatch(r"v\d+", name) and "/" in path:
        name = path.split("/")[-2]  # a major-version suffix: the package is named before it
    found.names[i] = {name.replace("-", "_").replace(".", "_")}


def _code(lines: Sequence[str], imports: Imports, language: str | None) -> str:
    """The file's lines that are neither import statements nor whole-line comments."""
    mark = "#" if language == "python" else "//"
    return "\n".join(line for i, line in enumerate(lines)
                     if i not in imports.lines and not line.lstrip().startswith(mark))


def _uses(name: str, code: str) -> bool:
    return re.search(r"(?<![\w$.])" + re.escape(name) + r"(?![\w$])", code) is not None


def head_choice(original: Sequence[str], keep: Sequence[str], keep_origin: Sequence[int],
                drop: Sequence[str], drop_origin: Sequence[int],
                language: str | None) -> str | None:
    """``"keep"``, ``"delete"`` or ``None`` (the code does not say) for a sketch read two
    ways at its head: ``keep`` keeps original lines above its first line that ``drop``
    deletes (each file with the original index of each line, -1 for a new one).

    ``"keep"``: ``drop`` deletes an import of a name its code still uses, bound by no import
    left. ``"delete"``: every line ``drop`` deletes beyond ``keep`` is an import statement
    (or blank), each binds names, every one of which the original's code used and neither
    file's code uses any more: the change took their last use."""
    hidden = sorted(set(keep_origin) - set(drop_origin) - {-1})
    if not hidden:
        return None
    before = imports_of(original, language)
    after_drop = imports_of(drop, language)
    after_keep = imports_of(keep, language)
    if before is None or after_drop is None or after_keep is None:
        return None
    statements = [i for i in hidden if i in before.names]
    names = set().union(*(before.names[i] for i in statements)) if statements else set()
    if not names:
        return None
    drop_code = _code(drop, after_drop, language)
    left = after_drop.bound()
    if any(_uses(name, drop_code) for name in names - left):
        return "keep"
    only_imports = all(i in before.lines or not original[i].strip() for i in hidden)
    if not only_imports or not before.complete:
        return None
    per_statement = [before.names[i] for i in statements]
    if any(not group for group in per_statement):
        return None
    original_code = _code(original, before, language)
    keep_code = _code(keep, after_keep, language)
    if all(_uses(name, original_code) and not _uses(name, keep_code) for name in names):
        return "delete"
    return None
