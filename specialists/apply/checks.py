"""Safety checks on a merge before it is returned: placeholders, mass deletion, parse errors.

The parse check uses tree-sitter on the edited regions only, widened to the enclosing
top-level statements, in the original and in the result: a region that parsed before and
does not now is a reason to abstain (the whole files are compared where the original's
region does not parse on its own). tree-sitter's Python grammar accepts a block with no
body, so where a Python region has that shape Python's own parser is asked too. Parsing
windows keeps the check to a fraction of a millisecond on files where a whole-file parse
costs about 2 ms.
"""

from __future__ import annotations

import ast
import importlib
import re
import string
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from specialists.apply.languages import definition_name
from specialists.apply.result import Abstain, ApplyOptions
from specialists.apply.text import indent_width, indent_widths

__all__ = ["check_deletions", "check_imported_definitions", "check_local_duplicates",
           "check_parse", "check_placeholders", "check_redefinitions", "has_parse_error",
           "parser_for"]

_GRAMMARS = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
}
_PLACEHOLDER = re.compile(
    r"(\.\.\.|…)\s*(existing|rest of|remains?|unchanged|keep|same|omitted|previous)", re.I
)
# what a kept top-level line starts with (a statement, a decorator, a string, a comment)
_TOP_LEVEL_FIRST = frozenset(string.ascii_letters + "_@$/\"'#[")


@lru_cache(maxsize=None)
def has_parse_error(text: str, language: str | None) -> bool | None:
    """Does tree-sitter find a syntax error in ``text``? ``None`` when the language has no
    grammar installed (nothing can be said)."""
    parser = parser_for(language)
    if parser is None:
        return None
    return bool(parser.parse(text.encode()).root_node.has_error)


def parser_for(language: str | None) -> Any | None:
    """A tree-sitter parser for the language, or ``None`` if no grammar is installed."""
    if language not in _GRAMMARS:
        return None
    module_name, attr = _GRAMMARS[language]
    try:
        import tree_sitter

        grammar = getattr(importlib.import_module(module_name), attr)()
        return tree_sitter.Parser(tree_sitter.Language(grammar))
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


def check_placeholders(out: list[str], origin: list[int]) -> None:
    """No new line may still carry a lazy marker (``foo(/* ... existing args ... */)``)."""
    for k, line in enumerate(out):
        if origin[k] < 0 and ("..." in line or "…" in line) and _PLACEHOLDER.search(line):
            raise Abstain(f"a placeholder would be left in the file: {line.strip()!r}")


def check_local_duplicates(out: list[str], origin: list[int], reach: int = 3) -> None:
    """A new line equal to a kept line a few lines away: the sketch meant that line, and a
    copy was placed next to the original instead of rewriting it (or a kept line should
    have gone). Braces and other short lines repeat legitimately and are not counted."""
    for k, line in enumerate(out):
        if origin[k] >= 0:
            continue
        key = line.strip()
        if len(key) <= 4 or not any(ch.isalnum() for ch in key):
            continue
        for q in range(max(0, k - reach), min(len(out), k + reach + 1)):
            if origin[q] >= 0 and out[q].strip() == key:
                raise Abstain(f"the merge would put a copy of {key!r} next to the original line")


_BINDS = (
    re.compile(r"^import\s+(?:type\s+)?(?P<names>[\w$]+(?:\s*,\s*\{[^}]*\})?|\{[^}]*\}|"
               r"\*\s+as\s+[\w$]+)\s+from\b"),  # JavaScript / TypeScript
    re.compile(r"^(?:const|let|var)\s+(?P<names>[\w$]+|\{[^}]*\})\s*=\s*require\("),
    re.compile(r"^from\s+[\w.]+\s+import\s+(?P<names>[^()#]+?)\s*(?:#.*)?$"),  # Python
)


def _bound_names(key: str) -> set[str]:
    """The names a one-line import binds (``import a, {b as c} from``, ``const {d} =
    require(...)``, ``from m import e as f``), or none when the line is not one."""
    for pattern in _BINDS:
        m = pattern.match(key)
        if m is None:
            continue
        names = set()
        for part in re.split(r"[,{}]", m.group("names")):
            part = part.strip()
            if not part or part == "*":
                continue
            words = re.split(r"\s+as\s+|\s*:\s*", part)
            name = words[-1].strip()
            if re.fullmatch(r"[\w$]+", name):
                names.add(name)
        return names
    return set()


def check_imported_definitions(out: list[str], origin: list[int],
                               language: str | None) -> None:
    """A new import binds a name that a definition the merge keeps at the file's top level
    defines too. The sketch moved that definition to the module it now imports from (and
    its marker kept the old one), or imports a name the file already has: either way the
    file would define the name twice (a JavaScript module does not even load). Abstain."""
    names: dict[str, str] = {}
    for line, o in zip(out, origin):
        if o < 0 and line[:1] not in (" ", "\t"):
            key = line.strip()
            names.update(dict.fromkeys(_bound_names(key), key))
    if not names:
        return
    for line, o in zip(out, origin):
        key = line.strip()
        if o < 0 or line[:1] in (" ", "\t") or not key:
            continue
        found = definition_name(key, language)
        if found is not None and found[1] in names:
            raise Abstain(f"the sketch imports {found[1]!r} ({names[found[1]]!r}) and the "
                          "file still defines it: it does not say the definition went")


_IMPORT_FROM = re.compile(r"^(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+)\s*$"
                          r"|(?:const|let|var)\s+[\w${}\s,]+=\s*require\(\s*['\"]([^'\"]+)['\"]\s*\))")


def check_split_imports(out: list[str], origin: list[int], reach: int = 3) -> None:
    """A new import of a module next to a kept parenthesised import of the same module
    (``from x import (`` ..., blank lines between): the sketch rewrote that import list
    (into one line, or another list), or adds a second import beside it. Which, it does not
    say when the kept list is what a marker stands for: abstain rather than leave both.
    (Single-line imports of one module side by side are a common style: not counted.)"""
    heads: dict[int, int] | None = None
    for k, line in enumerate(out):
        if origin[k] >= 0:
            continue
        m = _IMPORT_FROM.match(line.strip())
        if m is None:
            continue
        module = next(g for g in m.groups() if g)
        if heads is None:
            heads = _list_heads(out)
        for step in (-1, 1):
            q, seen = k + step, 0
            while 0 <= q < len(out) and seen < reach:
                if out[q].strip():
                    seen += 1
                    if step < 0:
                        q = heads.get(q, q)  # an import list above counts as one line
                    other = _IMPORT_FROM.match(out[q].strip())
                    if other is not None and origin[q] >= 0 and out[q].rstrip().endswith("(") \
                            and next(g for g in other.groups() if g) == module:
                        raise Abstain(f"a new import of {module!r} next to the file's own: a "
                                      f"rewrite of it, or a second one?")
                q += step


def _list_heads(out: list[str]) -> dict[int, int]:
    """For each line of a parenthesised import list (``from x import (`` ... ``)``) after
    its first, the index of that first line."""
    heads: dict[int, int] = {}
    head = -1
    for k, line in enumerate(out):
        key = line.strip()
        if head >= 0:
            heads[k] = head
            if key.startswith(")"):
                head = -1
        elif key.endswith("(") and _IMPORT_FROM.match(key):
            head = k
    return heads


def check_redefinitions(out: list[str], origin: list[int], language: str | None) -> None:
    """Python: a new ``def``/``class`` beside a kept one of the same name, at the same depth
    in the same block, neither decorated. A sketch's full definition replaces the one of
    its name, so two of them mean the old one was left where the new one was placed (or
    the reverse); Python keeps only the later one anyway. Decorated pairs (``@overload``,
    a property's setter) are left alone."""
    if language != "python":
        return
    names = set()
    for line, o in zip(out, origin):
        if o < 0:
            found = definition_name(line.strip(), language)
            if found is not None:
                names.add(found[1])
    if not names:
        return  # no new definition: nothing to compare (most merges stop here)
    seen: dict[tuple[tuple[str, ...], str, str, int], list[int]] = {}
    parents: list[tuple[int, str]] = []  # (width, stripped line) of the open blocks
    previous = ""
    widths = indent_widths(out)
    only = next(iter(names)) if len(names) == 1 else None
    for k, key in enumerate(map(str.strip, out)):
        if not key:
            continue
        width = widths[k]
        while parents and parents[-1][0] >= width:
            parents.pop()
        named = only in key if only is not None else any(name in key for name in names)
        found = definition_name(key, language) if named else None
        if found is not None and found[1] in names and not previous.startswith("@"):
            scope = tuple(text for _, text in parents)  # the whole path of enclosing blocks
            seen.setdefault((scope, found[0], found[1], width), []).append(k)
        if key.endswith(":"):
            parents.append((width, key))
        previous = key
    for lines in seen.values():
        if len(lines) == 2 and (origin[lines[0]] < 0) != (origin[lines[1]] < 0):
            name = out[lines[0]].strip()
            raise Abstain(f"the merge would leave two definitions {name!r} side by side (one "
                          "new, one kept) where the sketch's should replace the original's")


def check_deletions(deleted_by_context: int, original_keys: list[str],
                    options: ApplyOptions) -> None:
    if deleted_by_context <= options.min_delete_lines:
        return  # (the non-blank lines are counted only when the first condition holds)
    nonblank = sum(map(bool, original_keys))
    if deleted_by_context > options.max_delete_share * nonblank:
        raise Abstain(
            f"the merge would delete {deleted_by_context} of {nonblank} original lines that "
            f"no remove comment names (limit {options.max_delete_share:.0%})"
        )


def _windows(out: list[str], origin: list[int], n_original: int) -> list[tuple[int, int]]:
    """Merged-line ranges around every edit, widened to kept top-level lines."""
    o = np.asarray(origin, dtype=np.int64)
    kept = o >= 0
    changed = np.flatnonzero(~kept).tolist()
    # lines were deleted here
    changed += (np.flatnonzero(kept[1:] & kept[:-1] & (o[1:] != o[:-1] + 1)) + 1).tolist()
    if len(origin) and origin[0] > 0:
        changed.append(0)
    if len(origin) and 0 <= origin[-1] < n_original - 1:
        changed.append(len(origin) - 1)  # lines deleted at the file's end
    if not changed:
        return []
    changed.sort()
    windows: list[tuple[int, int]] = []
    first = _TOP_LEVEL_FIRST  # a kept line starting with one is top-level
    for k in changed:
        if windows and k < windows[-1][1]:
            continue
        start = k
        while start > 0 and not (origin[start] >= 0 and out[start][:1] in first):
            start -= 1
        end = k + 1
        while end < len(out) and not (origin[end] >= 0 and out[end][:1] in first):
            end += 1
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def check_parse(original_raw: list[str], out: list[str], origin: list[int],
                language: str | None) -> None:
    """Abstain when an edited region parsed in the original and does not in the result.

    Each window around an edit is parsed in the result, and in the original only when the
    result's fails. Where the original's window fails too (the window cut a construct in
    two: a string, a bracket that a deletion reopened), the whole files are compared
    instead, so a merge that breaks a file that parsed is never returned. Python: where a
    window has the shape of a block with no body (which tree-sitter's grammar accepts),
    Python's own parser judges its indentation. (Asking Python's parser about every window
    turned exact merges of Python 2 code into abstains, caught no wrong merge on the
    development sample and cost 8% of the applier's speed: BENCHMARKS.md, round 5.)"""
    parser = parser_for(language)
    if parser is None:
        return
    whole_checked = False
    for start, end in _windows(out, origin, len(original_raw)):
        o_start = origin[start] if start < len(origin) and origin[start] >= 0 else 0
        o_end = origin[end] if end < len(origin) else len(original_raw)
        before_text = "\n".join(original_raw[o_start:o_end])
        after_text = "\n".join(out[start:end])
        # the result first: when it parses, the original need not be parsed at all
        if parser.parse(after_text.encode("utf-8", "surrogatepass")).root_node.has_error:
            if not parser.parse(before_text.encode("utf-8", "surrogatepass")).root_node.has_error:
                raise Abstain("the edited region parsed before the merge and does not after it")
            if not whole_checked:
                whole_checked = True
                if has_parse_error("\n".join(out), language) and not has_parse_error(
                        "\n".join(original_raw), language):
                    raise Abstain("the file parsed before the merge and does not after it")
            continue
        if language == "python" and _opens_empty_block(out, origin, start, end) \
                and _python_indentation_error(after_text) \
                and not _python_indentation_error(before_text):
            raise Abstain("the merge leaves a block with no body (a header kept beside its "
                          "rewrite?)")


def _opens_empty_block(out: list[str], origin: list[int], start: int, end: int) -> bool:
    """A new line, or one followed by a change, that ends in ``:`` and whose next line with
    text is not indented deeper: the shape of a Python block with no body, which
    tree-sitter's grammar accepts without an error."""
    for k in range(start, end):
        if origin[k] >= 0 and k + 1 < len(out) and origin[k + 1] == origin[k] + 1:
            continue  # an original line followed by the line that followed it
        line = out[k].rstrip()
        if not line.endswith(":"):
            continue
        nxt = k + 1
        while nxt < len(out) and not out[nxt].strip():
            nxt += 1
        if nxt >= len(out) or indent_width(out[nxt]) <= indent_width(line):
            return True
    return False


def _python_indentation_error(text: str) -> bool:
    """Whether Python's own parser rejects this text for its indentation (a block with no
    body, an unexpected indent). Other syntax errors are tree-sitter's to judge: its
    grammar still reads Python 2, which the project may be."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not our concern
            compile(text, "<merge>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except IndentationError:  # TabError is one
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return False
