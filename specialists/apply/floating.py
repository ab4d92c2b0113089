"""Where a floating piece goes: a group of code lines and ``remove`` comments between two
markers, with no exact anchor of its own.

A ``remove`` comment's quoted lines or named definition place it; a group of code that
opens a definition replaces the one of the same name; otherwise a block of modified lines is
placed by similarity, when exactly one contiguous region of the original fits it (rival
places, lines out of order or too far apart: abstain).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from specialists.apply.deletions import definitions_named, locate_remove
from specialists.apply.languages import definition_name
from specialists.apply.markers import LineKind, MarkerInfo
from specialists.apply.result import Abstain
from specialists.apply.similarity import similarities

if TYPE_CHECKING:
    from specialists.apply.reading import Reading

__all__ = ["check_replaced_imports", "locate_group"]


def locate_group(merger: Reading, g0: int, g1: int, lo: int, hi: int) -> tuple[int, int]:
    """The original region a group of remove comments and code lines replaces."""
    sk = merger.sk
    removes = [i for i in range(g0, g1 + 1) if sk.kinds[i] == LineKind.REMOVE]
    if not removes:
        return _locate_code(merger, g0, g1, lo, hi)
    t0, t1 = hi, lo
    cursor = lo
    for i in removes:
        if i in merger.dp_spans:
            span = merger.dp_spans[i]
            t0, t1 = min(t0, span[0]), max(t1, span[1])
            cursor = span[1]
            continue
        target = locate_remove(merger, sk.infos[i] or MarkerInfo(), cursor, hi, i, required=True)
        assert target is not None
        t0, t1 = min(t0, target[0]), max(t1, target[1])
        cursor = target[1]
    return t0, t1


def _locate_code(merger: Reading, j0: int, j1: int, lo: int, hi: int) -> tuple[int, int]:
    """Where a block with no exact anchor between two markers goes, or abstain."""
    sk = merger.sk
    span = sk.span(j0, j1)
    js = [j for j in range(j0, j1 + 1) if sk.keys[j] and sk.kinds[j] == LineKind.CODE]
    head = definition_name(sk.keys[js[0]], merger.language) if js else None
    if head is not None:
        found = definitions_named(merger, head[1], lo, hi)
        if len(found) == 1:
            merger.fuzzy += 1
            if not _opens_body(merger, js, j1):
                return found[0]
            # A changed header over a marker inside its body: the header line only.
            if len(js) == 1:
                return _header_line(merger, head[1], *found[0])
            raise Abstain("a changed definition header is followed by part of its body",
                          span)
    if not merger.options.fuzzy or not js:
        raise Abstain("a block between two markers has no line of the original to anchor on",
                      span)
    t0, t1 = _fuzzy_region(merger, js, lo, hi, span)
    if head is not None:
        _check_not_renamed(merger, head[1], t0, t1, span)
    return t0, t1


_IMPORTED = re.compile(
    r"""^(?:from\s+(?P<a>\S+)\s+import\b|import\s+(?P<b>[\w.]+)|(?:const|let|var)\s+[^=]+=\s*"""
    r"""require\(\s*['"](?P<c>[^'"]+)|import\s.*\sfrom\s+['"](?P<d>[^'"]+)|"(?P<e>[\w./-]+)"$)""")


def _check_import_rewrite(new: str, old: str, span: tuple[int, int]) -> None:
    """An import line placed by similarity over an import of another module: it is as
    likely a new import beside it (an import block's lines all look alike), and the
    sketch, with no context around it, does not say where it goes."""
    a, b = _IMPORTED.match(new), _IMPORTED.match(old)
    if a is None or b is None:
        return
    if next(g for g in a.groups() if g) != next(g for g in b.groups() if g) \
            and _names(new) != _names(old):  # the same names from another module: a rewrite
        raise Abstain("a new import between two markers resembles an import of another "
                      "module; the sketch does not say whether it replaces it", span)


def _other_names_same_module(new: str, old: str) -> bool:
    """Both are imports from one module, binding no name in common."""
    a, b = _IMPORTED.match(new), _IMPORTED.match(old)
    if a is None or b is None:
        return False
    return next(g for g in a.groups() if g) == next(g for g in b.groups() if g) \
        and not _bound(new) & _bound(old)


def _bound(line: str) -> set[str]:
    """The names an import line binds, as words."""
    return set(re.findall(r"\w+", _names(line))) - {"as", "import", "from", "const", "let",
                                                     "var", "require"}


def check_replaced_imports(merger: Reading, out: list[str]) -> None:
    """An import placed by similarity over one from the same module that binds other names
    (``import MAC`` over ``import WIN``) replaces it; where the merged file still uses a
    name only the old line bound, the new line more likely goes beside it: abstain."""
    for j, p in merger.replaced_imports:
        gone = _bound(merger.ok[p]) - _bound(merger.sk.keys[j])
        if not gone:
            continue
        used = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(gone))) + r")\b")
        if any(used.search(line) for line in out if not _IMPORTED.match(line.strip())):
            raise Abstain("a new import placed over one from the same module would drop a name "
                          "the file still uses; it may go beside it",
                          merger.sk.span(j, j))


def _names(line: str) -> str:
    """What an import line binds: the text after ``import`` (or before ``=``/``from``)."""
    if line.startswith("from ") and " import " in line:
        return line.split(" import ", 1)[1].strip()
    if " from " in line:
        return line.split(" from ", 1)[0].strip()
    if "=" in line:
        return line.split("=", 1)[0].strip()
    return line


def _check_not_renamed(merger: Reading, name: str, t0: int, t1: int,
                       span: tuple[int, int]) -> None:
    """A block that opens a definition the original does not have, placed by similarity
    over one that defines another name, would delete that one: in a small file a short
    new function looks like any other. It may as well be new code beside it: abstain."""
    for p in range(t0, t1):
        found = definition_name(merger.ok[p], merger.language)
        if found is not None and found[1] != name:
            raise Abstain(f"a new definition {name!r} resembles {found[1]!r}; the sketch does "
                          f"not say whether it replaces it or goes beside it", span)


def _opens_body(merger: Reading, js: list[int], j1: int) -> bool:
    """Whether the marker after the group stands inside the group's first definition."""
    sk = merger.sk
    nxt = j1 + 1
    return (nxt < merger.m and sk.kinds[nxt] == LineKind.MARKER
            and sk.widths[nxt] > sk.widths[js[0]])


def _header_line(merger: Reading, name: str, t0: int, t1: int) -> tuple[int, int]:
    """The line of t0..t1 that opens the definition ``name`` (the first line if none)."""
    for p in range(t0, t1):
        found = definition_name(merger.ok[p], merger.language)
        if found and found[1] == name:
            return (p, p + 1)
    return (t0, t0 + 1)


def _fuzzy_region(merger: Reading, js: list[int], lo: int, hi: int,
                  span: tuple[int, int]) -> tuple[int, int]:
    """The one contiguous original region the block's lines are edits of."""
    threshold = merger.options.fuzzy_threshold
    sk = merger.sk
    best: dict[int, list[tuple[float, int]]] = {}
    for j in js:
        key = sk.keys[j]
        cached = sk.similar_lines.get((j, lo, hi, threshold))
        if cached is not None:  # the near-tie readings ask again
            best[j] = cached
            continue
        scored = sorted(similarities(key, merger.ok, lo, hi, threshold, exact=True), reverse=True)
        best[j] = sk.similar_lines[j, lo, hi, threshold] = scored
    matched = {j: s[0] for j, s in best.items() if s}
    if not matched:
        raise Abstain("a block between two markers matches no line of the original", span)
    for j, (ratio, p) in matched.items():
        rivals = [q for r, q in best[j][1:] if r > ratio - 0.1 and q != p]
        if rivals:
            raise Abstain("a block between two markers is similar to more than one place", span)
    for j, (_, p) in matched.items():
        _check_import_rewrite(sk.keys[j], merger.ok[p], span)
        if _other_names_same_module(sk.keys[j], merger.ok[p]):
            merger.replaced_imports.append((j, p))
    positions = [p for _, p in (matched[j] for j in js if j in matched)]
    if positions != sorted(positions):  # two new lines may rewrite one old line
        raise Abstain("a block between two markers matches the original out of order", span)
    t0, t1 = positions[0], positions[-1] + 1
    if t1 - t0 > len(js) + 2:
        raise Abstain("a block between two markers matches lines too far apart", span)
    merger.fuzzy += 1
    return (t0, t1)
