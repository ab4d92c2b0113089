"""Checks on the piecewise reading once it has placed everything: readings the sketch
allows besides the one chosen (a block anchored by trivial lines, an edge line left
unmatched, code that also reads as a pure insertion), near ties under perturbed weights,
and the cross-check against the second, global reading (``align``). Each abstains rather
than return one of two files the sketch could mean. (``checks`` holds the checks on the
merged file itself: placeholders, mass deletion, parse errors.)"""

from __future__ import annotations

from typing import Iterator

from specialists.apply.anchoring import weak
from specialists.apply.deletions import whole_definitions
from specialists.apply.gap_search import Weights
from specialists.apply.languages import definition_name, definitions_of
from specialists.apply.markers import LineKind
from specialists.apply.merger import AMBIGUOUS, Merger
from specialists.apply.result import Abstain, ApplyOptions, ReadAgain
from specialists.apply.sketch_lines import IMPLICIT, SketchLines
from specialists.apply.text import Lines

__all__ = ["check_blank_edge_context", "check_closed_up_context", "check_context_elsewhere",
           "check_context_split", "check_copied_edges", "check_insertion_reading",
           "check_near_ties", "check_reindent_elsewhere", "check_unmatched_edges",
           "check_weak_blocks", "code_blocks", "cross_check", "unmatched_edge"]


INSERTION_READING = ("the block also reads as new code inserted between two adjacent original "
                     "lines, deleting nothing")


def code_blocks(merger: Merger) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of code lines in the sketch, between markers."""
    kinds, j = merger.sk.kinds, 0
    while j < merger.m:
        if kinds[j] != LineKind.CODE:
            j += 1
            continue
        start = j
        while j < merger.m and kinds[j] == LineKind.CODE:
            j += 1
        yield start, j


def check_weak_blocks(merger: Merger) -> None:
    """A block that changes something must hold one line that can anchor it: a block of
    braces, blank lines and ``return`` around new code lands wherever those lines repeat.
    A block between two markers whose only matched lines are blank lands where the blank
    lines happen to fit (a file's one double blank line, say) and is refused too; at the
    file's edge, with no marker there, the edge places it."""
    sk = merger.sk
    for start, j in code_blocks(merger):
        keys = [(sk.keys[i], merger.sm[i] >= 0) for i in range(start, j) if sk.keys[i]]
        _check_reindent_only(merger, start, j)
        if any(not matched for _, matched in keys) and any(matched for _, matched in keys) \
                and all(weak(key) and len(merger.pos[key]) > 1 for key, matched in keys if matched):
            raise Abstain("a block is anchored only by lines that repeat everywhere "
                          "(braces, blank lines)", sk.span(start, j - 1))
        if keys and not any(matched for _, matched in keys) and _between_markers(
                merger, start, j) and any(merger.sm[i] >= 0 for i in range(start, j)):
            raise Abstain(ONLY_BLANKS, sk.span(start, j - 1))


ONLY_BLANKS = ("a block between two markers matches the original only in its blank lines: it "
               "does not say where it goes")


def _between_markers(merger: Merger, start: int, end: int) -> bool:
    """Block start..end has a marker right above and right below it: neither the file's
    edge nor a remove comment places it."""
    kinds = merger.sk.kinds
    return (start > 0 and end < merger.m and kinds[start - 1] == LineKind.MARKER
            and kinds[end] == LineKind.MARKER)


def check_insertion_reading(merger: Merger) -> None:
    """A block that deletes, between two of its matched lines, a definition the sketch does
    not name may also read as new code inserted whole between two adjacent original lines: its last lines where
    this reading put them, its first lines right before them, nothing deleted (or the
    mirror image). A new test that copies its neighbour reads both ways: its copied lines
    match the neighbour's, whose other lines then look deleted. Two readings, two files:
    abstain."""
    sk, sm, ok, language = merger.sk, merger.sm, merger.ok, merger.language
    defined: set[str] | None = None
    named: set[str] | None = None
    for start, end in code_blocks(merger):
        inside = [j for j in range(start, end) if sm[j] >= 0]
        deleted = [p for a, b in zip(inside, inside[1:]) for p in range(sm[a] + 1, sm[b])
                   if ok[p]]
        if not deleted:
            continue
        gone = [definition_name(ok[p], language) for p in deleted]
        keys = sk.keys[start:end]
        outer = min((sk.widths[j] for j in range(start, end) if sk.keys[j]), default=0)
        if defined is None:
            defined = {name for _, name in merger.definitions()}
        if named is None:
            named = {name for _, name in definitions_of(sk.keys, language)}
        if all(found is None or found[1] in named for found in gone) and not _opens_new_definition(
                merger, start, end, outer, defined):
            # deletes no definition the sketch does not name, and the block opens no new
            # definition whose body could have matched its neighbour's lines
            continue
        for t, i in _insertion_splits(keys, ok, sm[start:end]):
            # the lines between are then new: an outermost definition the file has would be
            # a second one
            names = (definition_name(keys[x], language) for x in range(t, i)
                     if keys[x] and sk.widths[start + x] == outer)
            if not any(found is not None and found[1] in defined for found in names):
                raise ReadAgain(INSERTION_READING, sk.span(start, end - 1),
                                (deleted[0], deleted[-1] + 1))


def _opens_new_definition(merger: Merger, start: int, end: int, outer: int,
                          defined: set[str]) -> bool:
    """The block holds, at its outermost depth, a new line opening a definition whose name
    the original does not define (a new test beside its neighbour)."""
    sk = merger.sk
    for j in range(start, end):
        if merger.sm[j] < 0 and sk.keys[j] and sk.widths[j] == outer:
            found = definition_name(sk.keys[j], merger.language)
            if found is not None and found[1] not in defined:
                return True
    return False


def _insertion_splits(keys: list[str], ok: list[str],
                      placed: list[int]) -> Iterator[tuple[int, int]]:
    """(t, i): the block's last lines keys[i:] stay where ``placed`` has them and its first
    t lines are the t original lines right before them (or its first lines stay and its
    last lines follow them), with a line with text between t and i."""
    size = len(keys)
    for i in range(size - 1, 0, -1):  # last lines kept in place, first lines moved down
        s = placed[i]
        if s < 0 or any(placed[x] != s + x - i for x in range(i, size)):
            break
        for t in range(1, i):
            if s - t >= 0 and placed[t - 1] != s - 1 and any(keys[t:i]) \
                    and ok[s - t:s] == keys[:t]:
                yield t, i
    for t in range(1, size):  # first lines kept in place, last lines moved up
        s = placed[t - 1] + 1
        if s <= 0 or any(placed[x] != s - t + x for x in range(t)):
            break
        for i in range(size - 1, t, -1):
            if placed[i] != s and any(keys[t:i]) and ok[s:s + size - i] == keys[i:]:
                yield t, i


def check_copied_edges(merger: Merger) -> None:
    """A block whose lines past its last pinned line (found once in the original and once
    in the sketch), up to the marker after it, are a whole unit (a header that opens a
    block, its body, its closing line at the header's depth) that starts with a new line
    and matches the original only where the original repeats itself, those matches
    replacing original lines between them: a new unit that copies its neighbour (a test
    beside a test: ``it('…', function(done){`` / ``var app = express();`` / … / ``})``).
    It reads as a rewrite of the next unit, whose repeated lines it matches, or as the
    whole unit inserted after the pinned lines, deleting nothing (the mirror image before
    a block's first pinned line too). Two readings, two files: abstain."""
    sk, sm, ok, pos = merger.sk, merger.sm, merger.ok, merger.pos
    kinds, m = sk.kinds, merger.m
    for start, end in code_blocks(merger):
        text = [j for j in range(start, end) if sk.keys[j]]
        pinned = [j for j in text if sm[j] >= 0 and len(pos.get(sk.keys[j], ())) == 1
                  and merger.scount.get(sk.keys[j]) == 1]
        if not pinned:
            continue
        sides = []
        if end < m and kinds[end] == LineKind.MARKER:
            sides.append([j for j in text if j > pinned[-1]])
        if start > 0 and kinds[start - 1] == LineKind.MARKER:
            sides.append([j for j in text if j < pinned[0]])
        for side in sides:
            unit = _new_unit(merger, side)
            if unit is None:
                continue
            matched = [sm[j] for j in unit if sm[j] >= 0]
            if len(matched) < 3 or any(len(pos.get(sk.keys[j], ())) == 1
                                       for j in unit if sm[j] >= 0):
                continue
            placed = {sm[j] for j in text if sm[j] >= 0}
            if any(ok[p] and p not in placed for p in range(min(matched), max(matched))):
                raise ReadAgain("a new unit that repeats its neighbour's lines: it rewrites "
                                "the neighbour, or is inserted beside it",
                                sk.span(unit[0], unit[-1]), (min(matched), max(matched) + 1))


def _new_unit(merger: Merger, side: list[int]) -> list[int] | None:
    """The lines of ``side`` from its first new line on (or up to its last new line) when
    they are one whole unit: the first is new and opens a block (ends with ``{``, ``(``,
    ``[`` or ``:``), or is a decorator stacked on such a header; the last is at the
    header's depth (the closing line; in Python also the body's last line), every line
    between deeper."""
    sk, sm = merger.sk, merger.sm
    new = [i for i, j in enumerate(side) if sm[j] < 0]
    if not new:
        return None
    for unit in (side[new[0]:], side[:new[-1] + 1]):
        if len(unit) < 4:
            continue
        first, last = unit[0], unit[-1]
        at = 0  # decorators stacked above the header belong to the unit
        while at < len(unit) - 1 and sk.keys[unit[at]].startswith("@") \
                and sk.widths[unit[at]] == sk.widths[first]:
            at += 1
        head = unit[at]
        if sm[first] >= 0 or sk.widths[head] != sk.widths[first] \
                or not sk.keys[head].endswith(("{", "(", "[", ":")):
            continue
        level = sk.widths[head]
        inner = unit[at + 1:-1]
        if all(sk.widths[j] > level for j in inner) and (
                sk.widths[last] == level or (sk.widths[last] > level
                                             and merger.language == "python")):
            return unit
    return None


def _context_only_blocks(merger: Merger) -> Iterator[tuple[int, int, list[int]]]:
    """(start, end, lines with text) of each block of context only: two or more lines with
    text, each placed where the original has it, in order, no original line with text
    between them left out, and no ``remove`` comment beside the block: a block that
    changes nothing where it is placed."""
    sk, sm, ok = merger.sk, merger.sm, merger.ok
    for start, end in code_blocks(merger):
        text = [j for j in range(start, end) if sk.keys[j]]
        if len(text) < 2 or any(sm[j] < 0 for j in text):
            continue
        if any(sk.kinds[j] == LineKind.REMOVE for j in (start - 1, end) if 0 <= j < merger.m):
            continue
        placed = {sm[j] for j in text}
        if any(sm[b] <= sm[a] for a, b in zip(text, text[1:])) or any(
                ok[p] and p not in placed for p in range(sm[text[0]], sm[text[-1]] + 1)):
            continue  # the block moves or deletes lines: it changes something
        yield start, end, text


def check_closed_up_context(merger: Merger) -> None:
    """A block of context only (its lines where the original has them, in order, nothing
    new, nothing deleted) whose edge line next to a marker the original also has further
    away, past whole definitions: placed there, the block shows the lines around those
    definitions closed up, which deletes them (how a writer shows a deleted definition:
    ``return x`` / blank / ``@property`` / marker). A block that changes nothing is rarely
    written for its own sake, so the nearest place is no safer a guess: abstain."""
    sk, sm, n = merger.sk, merger.sm, merger.n
    kinds = sk.kinds
    for start, end, text in _context_only_blocks(merger):
        if end < merger.m and kinds[end] == LineKind.MARKER:
            edge, inner = text[-1], text[-2]
            limit = next((sm[j] for j in range(end, merger.m) if sm[j] >= 0), n)
            for q in merger.pos.get(sk.keys[edge], ()):
                if sm[edge] < q < limit and whole_definitions(merger, sm[inner] + 1, q):
                    raise Abstain("a block of context only whose last line is also found past "
                                  "whole definitions: it may show them deleted",
                                  sk.span(edge, edge))
        if start > 0 and kinds[start - 1] == LineKind.MARKER:
            edge, inner = text[0], text[1]
            floor = next((sm[j] for j in range(start - 1, -1, -1) if sm[j] >= 0), -1)
            for q in merger.pos.get(sk.keys[edge], ()):
                if floor < q < sm[edge] and whole_definitions(merger, q + 1, sm[inner]):
                    raise Abstain("a block of context only whose first line is also found "
                                  "before whole definitions: it may show them deleted",
                                  sk.span(edge, edge))


def check_context_elsewhere(merger: Merger) -> None:
    """A block of context only (its lines where the original has them, in order, nothing
    new, nothing deleted, no ``remove`` comment beside it), none of whose lines is found
    once in the original, that also fits a few lines away between the same anchors with
    lines between its lines there: placed there, the block shows those lines deleted by
    omission (``assert x`` / blank / ``@parametrize(...)`` with the decorator between them
    gone). A block that changes nothing is rarely written for its own sake, so the place
    where it does nothing is no safer a guess: abstain."""
    sk, sm, ok, pos, m = merger.sk, merger.sm, merger.ok, merger.pos, merger.m
    for start, end, text in _context_only_blocks(merger):
        if all(weak(sk.keys[j]) for j in text) or any(len(pos[sk.keys[j]]) == 1 for j in text):
            continue
        lo, hi = sm[text[0]], sm[text[-1]]
        floor = next((sm[j] for j in range(start - 1, -1, -1) if sm[j] >= 0), -1)
        limit = next((sm[j] for j in range(end, m) if sm[j] >= 0), merger.n)
        for q in pos[sk.keys[text[0]]]:
            if q != lo and floor < q < limit \
                    and _fits_with_gaps(ok, sk.keys, text, q, min(limit, q + hi - lo + 1 + _SLACK)):
                raise Abstain("a block of context only that also fits nearby with lines between "
                              "its lines: it may show them deleted", sk.span(start, end - 1))


_SLACK = 3  # lines the other place may hold besides the block's


def check_blank_edge_context(merger: Merger, origin: list[int]) -> None:
    """A block that changes nothing where it is placed (its lines with text the original's,
    in order, with as many blank lines between as the original has, nothing new, no
    ``remove`` comment beside it) whose edge next to a marker is a blank line: a block is
    written for a change, and the one such a block can show is the lines between its last
    line with text and a later blank line deleted (``from .globals import x`` / blank, with
    the assignment under the import gone). Matched to the nearest blank line it changes
    nothing; the sketch does not say which: abstain."""
    sk, sm, ok, m = merger.sk, merger.sm, merger.ok, merger.m
    kept = set(origin)
    for start, end in code_blocks(merger):
        text = [j for j in range(start, end) if sk.keys[j]]
        if not text or any(sm[j] < 0 for j in text) or any(
                sk.kinds[j] == LineKind.REMOVE for j in (start - 1, end) if 0 <= j < m):
            continue
        if any(sm[b] <= sm[a] or b - a != sm[b] - sm[a]
               or any(ok[p] for p in range(sm[a] + 1, sm[b])) for a, b in zip(text, text[1:])):
            continue  # it moves, deletes or adds lines, or writes a blank run shorter
        if _ends_file(merger, start, end, text, kept):
            continue
        tail = end < m and sk.kinds[end] == LineKind.MARKER and not sk.keys[end - 1]
        head = start > 0 and sk.kinds[start - 1] == LineKind.MARKER and not sk.keys[start]
        if tail or head:
            raise Abstain("a block that changes nothing has a blank line next to a marker: it "
                          "may show the lines up to a later blank line deleted",
                          sk.span(start, end - 1))


def _ends_file(merger: Merger, start: int, end: int, text: list[int], kept: set[int]) -> bool:
    """The block is the sketch's last (first), with no marker after (before) it, and it
    ends (starts) the file there: the merge deletes original lines after (before) it, or
    its last line is the file's (whose final newline the sketch writes, ``merge``)."""
    sk, sm, ok = merger.sk, merger.sm, merger.ok
    beyond = range(sm[text[-1]] + 1, merger.n)
    if end < merger.m and sk.kinds[end] == IMPLICIT and (
            any(p not in kept for p in beyond) or not any(ok[p] for p in beyond)):
        return True
    return start > 0 and sk.kinds[start - 1] == IMPLICIT and any(
        p not in kept for p in range(sm[text[0]]))


def check_context_split(merger: Merger, origin: list[int]) -> None:
    """A block of context only (its lines where the original has them, in order, nothing
    new, nothing deleted, no ``remove`` comment beside it) whose last lines, one or more
    that are not all trivial, also stand together further on before the next anchor (or
    whose first lines stand together further back after the previous one): read there, the
    block keeps its other lines in place and deletes the lines between, as context around a
    deletion does (``"github"`` / ``)`` / ``add_row(`` with the repeated row between gone).
    A block that changes nothing is rarely written for its own sake, so the place where it
    does nothing is no safer a guess: abstain."""
    sk, sm, ok, pos, m = merger.sk, merger.sm, merger.ok, merger.pos, merger.m
    kept = set(origin)
    for start, end, text in _context_only_blocks(merger):
        if any(b - a > sm[b] - sm[a] for a, b in zip(text, text[1:])) or any(
                p not in kept for p in range(sm[text[0]], sm[text[-1]])):
            continue  # it writes a blank run longer or shorter: that is its change
        floor = next((sm[j] for j in range(start - 1, -1, -1) if sm[j] >= 0), -1)
        limit = next((sm[j] for j in range(end, m) if sm[j] >= 0), merger.n)
        for s in range(1, len(text)):
            tail, head = text[s:], text[:s]
            if not all(weak(sk.keys[j]) for j in tail):
                for q in pos[sk.keys[tail[0]]]:
                    if sm[tail[0]] < q < limit and _stands_together(ok, sk.keys, tail, q, limit):
                        raise Abstain("a block of context only whose last lines also stand "
                                      "together further on: it may show the lines between "
                                      "deleted", sk.span(start, end - 1))
            if not all(weak(sk.keys[j]) for j in head):
                for q in pos[sk.keys[head[0]]]:
                    top = q + sm[head[-1]] - sm[head[0]]
                    if floor < q and top < sm[head[0]] and _stands_together(
                            ok, sk.keys, head, q, sm[head[-1]]):
                        raise Abstain("a block of context only whose first lines also stand "
                                      "together further back: it may show the lines between "
                                      "deleted", sk.span(start, end - 1))


def check_reindent_elsewhere(merger: Merger) -> None:
    """A block that keeps a line of the original but moves it to another depth (wraps it
    in new code), whose other kept lines, none found once in the original, also stand in
    the same order at another place between the same anchors: there the block rewrites
    that line instead. The cost model, not the sketch, chose between the two: abstain."""
    sk, sm, ok, pos, m = merger.sk, merger.sm, merger.ok, merger.pos, merger.m
    for start, end in code_blocks(merger):
        text = [j for j in range(start, end) if sk.keys[j] and sm[j] >= 0]
        moved = [j for j in text if sk.widths[j] - merger.shift != merger.owidth[sm[j]]]
        kept = [j for j in text if j not in moved]
        if not moved or len(kept) < 2 or any(len(pos[sk.keys[j]]) == 1 for j in kept) \
                or all(weak(sk.keys[j]) for j in kept):
            continue
        floor = next((sm[j] for j in range(start - 1, -1, -1) if sm[j] >= 0), -1)
        limit = next((sm[j] for j in range(end, m) if sm[j] >= 0), merger.n)
        span = sm[kept[-1]] - sm[kept[0]] + 1
        for q in pos[sk.keys[kept[0]]]:
            if q != sm[kept[0]] and floor < q < limit and _in_order(
                    ok, sk.keys, kept, q, min(limit, q + span + _SLACK)):
                raise Abstain("a block that moves a kept line to another depth also fits "
                              "elsewhere, where it would rewrite that line",
                              sk.span(start, end - 1))


def _in_order(ok: list[str], keys: list[str], text: list[int], q: int, stop: int) -> bool:
    """The lines ``text`` found in order from original line q (its first) before ``stop``."""
    p = q
    for j in text[1:]:
        p = next((x for x in range(p + 1, stop) if ok[x] == keys[j]), -1)
        if p < 0:
            return False
    return True


def _stands_together(ok: list[str], keys: list[str], text: list[int], q: int, stop: int) -> bool:
    """The lines ``text`` found in order from original line q (its first), before
    ``stop``, with only blank lines between them."""
    p = q
    for j in text[1:]:
        p += 1
        while p < stop and not ok[p]:
            p += 1
        if p >= stop or ok[p] != keys[j]:
            return False
    return True


def _fits_with_gaps(ok: list[str], keys: list[str], text: list[int], q: int, stop: int) -> bool:
    """The block's lines ``text`` found in order from original line q (its first) before
    ``stop``, with a line with text between two of them."""
    p, gaps = q, False
    for j in text[1:]:
        at = next((x for x in range(p + 1, stop) if ok[x] == keys[j]), -1)
        if at < 0:
            return False
        gaps = gaps or any(ok[x] for x in range(p + 1, at))
        p = at
    return gaps


def _check_reindent_only(merger: Merger, start: int, end: int) -> None:
    """A block of context lines only, landed where the original indents them differently:
    its one effect would be a re-indent, which a sketch writes with the code that causes it
    (a new ``if`` around them). More likely the block belongs where the indentation agrees.
    Unless each line moved comes out from under a header the block deletes (``_header_deleted``):
    the deletion is the code that causes it."""
    sk, sm = merger.sk, merger.sm
    lines = [i for i in range(start, end) if sk.keys[i]]
    if not lines or any(sm[i] < 0 for i in lines):
        return
    moved = [k for k, i in enumerate(lines) if sk.widths[i] - merger.shift != merger.owidth[sm[i]]]
    if moved and not all(k > 0 and _header_deleted(merger, lines[k - 1], lines[k])
                         for k in moved):
        raise Abstain("a block of unchanged lines would only change their indentation",
                      sk.span(lines[0], lines[-1]))


def _header_deleted(merger: Merger, i: int, j: int) -> bool:
    """Sketch lines i and j, consecutive lines with text of a block, are matched with an
    original line between them that is not written (deleted by context), shallower than j's
    original line and as deep as j is written: the header (``else:``, ``try:``) that j was
    under, deleted, so j moves out of its body. The re-indent is the change the sketch makes,
    not a sign that the block belongs elsewhere."""
    sm, ok, owidth = merger.sm, merger.ok, merger.owidth
    if not sm[i] < sm[j]:
        return False
    width = merger.sk.widths[j] - merger.shift
    return width < owidth[sm[j]] and any(
        ok[q] and owidth[q] == width for q in range(sm[i] + 1, sm[j]))


def check_unmatched_edges(merger: Merger) -> None:
    """A block's edge line next to a marker is usually context. Left unmatched although the
    original has it between the anchors around the block, it says the block may belong
    where that line is: the placement chosen is one reading of two."""
    found = unmatched_edge(merger)
    if found is not None:
        raise Abstain("a block's edge line is in the original but the block was "
                      "placed elsewhere", merger.sk.span(found[0], found[0]))


def unmatched_edge(merger: Merger) -> tuple[int, list[int]] | None:
    """The first block edge line ``check_unmatched_edges`` objects to, with the places
    between the anchors around its block where the original has it; ``None`` if none."""
    sk, sm = merger.sk, merger.sm
    before = -1
    for start, j in code_blocks(merger):
        after = next((sm[i] for i in range(j, merger.m) if sm[i] >= 0), merger.n)
        body = [i for i in range(start, j) if sk.keys[i]]
        if body and any(sm[i] >= 0 for i in body):
            for edge in sorted({body[0], body[-1]}):
                key = sk.keys[edge]
                if (sm[edge] >= 0 or weak(key) or not sk.boundary[edge]
                        or edge in merger.new_lines):  # new on purpose (``merge``)
                    continue
                places = [p for p in merger.pos.get(key, ()) if before < p < after]
                if places and not _copied_edge(merger, edge, 1 if edge == body[0] else -1,
                                               start, j):
                    return edge, places
        before = max([before] + [sm[i] for i in range(start, j)])
    return None


def _copied_edge(merger: Merger, edge: int, step: int, start: int, end: int) -> bool:
    """The block's first (last) line is left new, and its next matched line inward is a
    copy of it placed on the original's line, every line between new: the new code starts
    and ends with the same line (a new test after one that ends alike). Matching the edge
    line there instead, with the copy new, writes the same lines in the same order."""
    sk, sm = merger.sk, merger.sm
    j = edge + step
    while start <= j < end:
        if sm[j] >= 0:
            return sk.keys[j] == sk.keys[edge]
        j += step
    return False


# Perturbed weights for the near-tie check: each moves one trade-off (deleting vs matching,
# keeping runs together) far enough to flip a placement that won by a hair.
# Cheaper deletions only: with the cross-check (a second reading) in place, the other two
# perturbations (dearer deletions, a stronger diagonal) caught no wrong answer this one
# misses on 9,744 benchmark sketches and cost 14% of the applier's time.
_NEAR_TIE_WEIGHTS = (Weights(delete=0.1, delete_blank=0.025),)


def check_near_ties(out: list[str], first: Merger) -> None:
    """Abstain when a placement changes under slightly different weights: the DP's choice
    was a near tie, so the sketch does not decide it (exact ties are caught in the DP)."""
    for weights in _NEAR_TIE_WEIGHTS:
        other = first.fork(weights)
        try:
            alt, _ = other.assemble(other.anchor())
        except Abstain:
            alt = None
        if alt != out:
            raise Abstain("ambiguous: another placement scores almost as well")


def cross_check(out: list[str], olines: Lines, sk: SketchLines, language: str | None,
                options: ApplyOptions,
                first: Merger | None = None) -> tuple[list[str], list[int]] | None:
    """Read the sketch a second, independent way (the global alignment of ``align``) and
    abstain when that reading gives another file. The two fail differently: the piecewise
    reading trusts its unique anchors and repairs gaps locally, the global one weighs every
    line of every block at once. Where both agree, a wrong merge needs both to be wrong in
    the same way; on the benchmark that cuts silent wrong answers by about a third for a
    small loss of exact merges (BENCHMARKS.md). Where the global reading has two optimal
    readings that write different code, the sketch reads two ways: abstain. Two that differ
    in blank lines only do not overrule a piecewise merge that passed its own checks (its
    blank-line readings are finer than the global costs; abstaining there too cost 171 and
    185 exact answers on the two development samples to catch 3 and 10 silent wrong ones).

    Readings that differ only in trailing whitespace on lines with code differ in which of the sketch's lines
    they take as kept (whose trailing whitespace the sketch's copy may add to) and which as
    new: both write the same code, and the one with less trailing whitespace is returned
    (merged lines and their origins) when it is the global one; otherwise ``None``."""
    second = first.fork() if first is not None else Merger(olines, sk, language, options)
    try:
        alt, alt_origin = second.merge_dp()
    except Abstain as exc:
        if exc.reason == AMBIGUOUS:
            raise  # its two optimal readings write different code: so may the sketch
        return None
    if alt != out and not _more_blank_lines_only(out, alt, first):
        if len(alt) == len(out) and all(a == b or (a.strip() and a.rstrip() == b.rstrip())
                                        for a, b in zip(out, alt)):
            return (alt, alt_origin) if _trailing(alt) < _trailing(out) else None
        at = next((i for i, (a, b) in enumerate(zip(out, alt)) if a != b), min(len(out), len(alt)))
        raise Abstain(f"two readings of the sketch give different files (from merged line "
                      f"{at + 1}); the sketch does not say which")
    return None


def _trailing(lines: list[str]) -> int:
    """Trailing whitespace characters over all lines."""
    return sum(len(line) - len(line.rstrip()) for line in lines)


def _more_blank_lines_only(out: list[str], alt: list[str], first: Merger | None) -> bool:
    """The readings differ in blank lines only, the piecewise one keeps more of them, and it
    guessed none (each blank line it wrote is the original's or the sketch's, none kept
    because the sketch seemed to drop it). The global reading's blank-line costs are a
    coarse model: on the benchmark the piecewise reading was exact in 227 of 291 such
    disagreements, the global one in 39, both wrong in 2."""
    if first is None or first.blank_guesses:
        return False
    text_out = [line for line in out if line.strip()]
    text_alt = [line for line in alt if line.strip()]
    return text_out == text_alt and len(out) > len(alt)
