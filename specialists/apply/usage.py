"""Names a Python file's imports bind, and names its code uses that nothing binds: what
decides a sketch that opens below import lines it does not show, with no marker above.

Such a sketch reads two ways: it starts the file, deleting the imports above its first line
(frontier models leave out the first marker there), or its writer forgot the marker and
the imports stay. The sketch's lines do not say which; the code can. A reading that
deletes an import whose name the file's code still uses, with nothing else binding it,
leaves a file that fails when that code runs: the other reading is meant. (Over every
commit of the development histories, 311 imports removed, none left its name used and
unbound so: ``symtable``'s reading of the file, not a token search, which 81 of them would
have fooled — names kept in strings, as attributes, or bound again by a definition.)

The opposite signal — imports whose every use the change took, kept by the one reading —
is not used: a commit that removes the last use of an imported name leaves the import a
third of the time (86 of 256 there), so it does not say the writer dropped them.

Python only (``ast`` and ``symtable``; a file that does not parse gives no decision);
other languages keep the abstain. Imports nothing of the applier.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from typing import Sequence

__all__ = ["LANGUAGES", "head_choice", "imported_names", "unbound_names"]

LANGUAGES = ("python",)  # the languages whose code ``head_choice`` reads

_STAR = re.compile(r"^\s*from\s+\S+\s+import\s+\*", re.MULTILINE)
# Names a module has without binding them.
_IMPLICIT = frozenset(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__spec__", "__path__", "__builtins__", "__loader__",
    "__package__", "__annotations__", "__dict__", "__module__", "__qualname__", "__class__",
}


def imported_names(text: str) -> dict[int, set[str]] | None:
    """The names each import statement of ``text`` binds, by each line the statement
    takes (0-based); ``None`` where ``text`` does not parse. ``from m import *`` binds no
    name known here; ``from __future__`` binds none."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: dict[int, set[str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names: set[str] = set()
        if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            for alias in node.names:
                if alias.name == "*":
                    continue
                if alias.asname:
                    names.add(alias.asname)
                elif isinstance(node, ast.Import):
                    names.add(alias.name.split(".")[0])
                else:
                    names.add(alias.name)
        for line in range(node.lineno - 1, node.end_lineno or node.lineno):
            found.setdefault(line, set()).update(names)
    return found


def unbound_names(text: str) -> set[str] | None:
    """Names ``text``'s code reads as module globals (at module level, or from a function
    or class that does not bind them) that the module binds nowhere — no import,
    assignment, definition or ``global`` write — and that are not builtins; ``None`` where
    it does not parse. A star import makes any name possible: then none is unbound."""
    try:
        top = symtable.symtable(text, "<sketch>", "exec")
    except (SyntaxError, ValueError):
        return None
    if _STAR.search(text):
        return set()
    bound = {s.get_name() for s in top.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    out: set[str] = set()
    stack = [top]
    while stack:
        table = stack.pop()
        for sym in table.get_symbols():
            name = sym.get_name()
            if (sym.is_referenced() and (table is top or sym.is_global())
                    and name not in bound and name not in _IMPLICIT):
                out.add(name)
        stack.extend(table.get_children())
    return out


def head_choice(original: Sequence[str], hidden: set[int], drop: Sequence[str],
                sketch: Sequence[str], language: str | None) -> str | None:
    """``"keep"`` or ``None`` for a sketch read two ways at its head: one reading keeps the
    original lines ``hidden`` (indices, above the sketch's first line) that the other,
    ``drop``, deletes. ``"keep"`` where ``drop`` deletes an import of a name its code still
    reads, nothing in it binds, and the sketch's own code (``sketch``, comment lines aside)
    names: the writer wrote code with that name. (A use only in original lines kept under a
    marker says less: a reading that kept them may have missed their deletion.) ``None``
    where the code does not say, or the language is not one of ``LANGUAGES``."""
    if language not in LANGUAGES or not hidden:
        return None
    before = imported_names("\n".join(original))
    unbound = unbound_names("\n".join(drop))
    if before is None or unbound is None:
        return None
    names = set().union(*(before.get(i, set()) for i in hidden)) & unbound
    written = "\n".join(line for line in sketch if not line.lstrip().startswith("#"))
    if any(re.search(r"(?<![\w.])" + re.escape(name) + r"(?!\w)", written) for name in names):
        return "keep"
    return None
