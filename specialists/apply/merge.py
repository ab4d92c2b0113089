"""Deterministic merge of a lazy sketch into the original file: ``merge``, the applier's core.

The sketch is read as blocks of concrete lines separated by markers (keep the original
lines here) and ``remove`` comments (delete what they name). Each block replaces the
original region it anchors to; lines of that region the block does not repeat are deleted
("deletion by context"), lines it adds are inserted.

Anchoring, cheapest first (pure string and hash-map work; tree-sitter only in ``checks``):

1. *Skeleton* (``anchoring``): lines unique in both the original and the sketch, chained by
   a patience diff, then extended line by line to neighbours.
2. *Gaps* (``gap_search``): between two fixed anchors, a small chaining DP over the
   remaining candidate pairs; two optimal placements that give different files: abstain.
3. *Floating pieces* (``floating``) with no exact anchor between two markers: a ``remove``
   comment's quoted line or named definition, a new definition replacing the one of the
   same name, or a modified line placed by similarity when exactly one region fits.

The merged lines are then written gap by gap (``expansion``, ``deletions``), and the result
is checked against the other readings the sketch allows (``merge_checks``). ``Merger``
(``merger``) holds one reading's state. Everything that cannot be placed with certainty
raises ``Abstain`` with the sketch span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specialists.apply import align as _align
from specialists.apply.anchoring import weak
from specialists.apply.expansion import HEAD_UNSAID, file_head
from specialists.apply.floating import check_replaced_imports
from specialists.apply.gap_search import DEFAULT_WEIGHTS, Weights, new_definitions
from specialists.apply.languages import definition_name
from specialists.apply.markers import LineKind
from specialists.apply.merge_checks import (check_blank_edge_context, check_closed_up_context,
                                            check_context_elsewhere, check_context_split,
                                            check_copied_edges, check_insertion_reading,
                                            check_near_ties, check_reindent_elsewhere,
                                            check_unmatched_edges, check_weak_blocks,
                                            code_blocks, cross_check, unmatched_edge)
from specialists.apply.merger import Merger
from specialists.apply.result import Abstain, ApplyOptions, ReadAgain
from specialists.apply.sketch_lines import IMPLICIT, SketchLines
from specialists.apply.text import Lines, sketch_text, split_lines
from specialists.apply.usage import LANGUAGES as USAGE_LANGUAGES
from specialists.apply.usage import head_choice

__all__ = ["Merge", "Weights", "merge"]


@dataclass
class Merge:
    """The merged lines, where each came from, and counts for the result's stats."""

    lines: Lines  # the original, split
    out: list[str]  # merged raw lines
    origin: list[int]  # original index of each merged line, or -1 for a new line
    deleted_by_context: int
    deleted_by_remove: int
    fuzzy: int
    blank_guesses: int  # blank runs kept that the sketch wrote shorter or left out
    final_newline: bool

    def text(self) -> str:
        return self.lines.join(self.out, self.final_newline)


def _sketch_ends_file(merger: Merger, origin: list[int]) -> bool:
    """Whether the merged file's last line is the sketch's last line (no marker after it
    kept more): then the sketch's own final newline, or its absence, is the file's."""
    sk = merger.sk
    last = len(sk.kinds) - 1
    while last >= 0 and sk.kinds[last] == IMPLICIT:
        last -= 1
    if last < 0 or sk.kinds[last] != LineKind.CODE or not origin:
        return False
    return origin[-1] == merger.sm[last]  # -1 == -1 when the line is new


def _blank_runs_only(merger: Merger) -> frozenset[int]:
    """The lines of each block that a blank run was kept in (the sketch wrote it shorter)
    and that changes nothing else: every line with text placed where the original has it,
    in order, at its indentation, with only blank lines between, no more of them than the
    original has; and no ``remove`` comment beside it (a block of context for a deletion
    changes nothing itself)."""
    guessed = merger.guessed_at
    if not guessed:
        return frozenset()
    sk, sm, ok, m = merger.sk, merger.sm, merger.ok, merger.m
    found: set[int] = set()
    for start, end in code_blocks(merger):
        if not any(start <= j < end for j in guessed):
            continue
        if any(sk.kinds[j] == LineKind.REMOVE for j in (start - 1, end) if 0 <= j < m):
            continue
        text = [j for j in range(start, end) if sk.keys[j]]
        if any(sm[j] < 0 or sk.widths[j] - merger.shift != merger.owidth[sm[j]] for j in text):
            continue
        if all(sm[a] < sm[b] and b - a <= sm[b] - sm[a]
               and not any(ok[p] for p in range(sm[a] + 1, sm[b]))
               for a, b in zip(text, text[1:])):
            found.update(range(start, end))
    return frozenset(found)


def _reread(merger: Merger, out: list[str], origin: list[int],
            **setting: Any) -> tuple[Merger, list[str], list[int]]:
    """Read the sketch again with one of the merger's settings changed (``setting``); that
    reading is kept when its result differs from ``out``, else the first one stands."""
    other = merger.fork()
    for name, value in setting.items():
        setattr(other, name, value)
    other_out, other_origin = other.assemble(other.anchor())
    if other_out != out:
        return other, other_out, other_origin
    return merger, out, origin


def _as_file_start(merger: Merger, out: list[str],
                   origin: list[int]) -> tuple[Merger, list[str], list[int]]:
    """A sketch with no first marker that changes nothing with the file's head above it
    kept (its docstring or comments, imports): a sketch that changes nothing is not sent,
    so it starts the file (frontier models leave out the first marker there), deleting the
    head it does not show. Read so when that changes something; else as it was."""
    first = next((p for p in merger.sm if p >= 0), 0)
    if first > 0 and file_head(merger.ok[:first]):
        return _reread(merger, out, origin, head_deletes=True)
    return merger, out, origin


def _as_file_end(merger: Merger, out: list[str],
                 origin: list[int]) -> tuple[Merger, list[str], list[int]]:
    """The mirror image of ``_as_file_start``: a sketch with no last marker that changes
    nothing with the definitions below its last line kept ends the file, deleting them.
    (Only where a definition opens there: with other code below, a house-style sketch that
    lost its last marker was read so, wrongly, on the second development sample.)"""
    last = next((p for p in reversed(merger.sm) if p >= 0), -1)
    after = next((key for key in merger.ok[last + 1:] if key), None) if last >= 0 else None
    if after is not None and (after.startswith("@")
                              or definition_name(after, merger.language) is not None):
        return _reread(merger, out, origin, tail_deletes=True)
    return merger, out, origin


def _edge_as_context(merger: Merger, edge: int,
                     places: list[int]) -> tuple[Merger, list[str], list[int]]:
    """A block's edge line next to a marker left new although the original has it, once,
    between the anchors around the block: read the sketch again with that line pinned
    there, as the context a writer puts next to a marker. That reading is kept when it
    places every other edge line too and passes the same checks (the cross-check with the
    global reading among them, later); otherwise the sketch reads two ways: abstain."""
    if len(places) == 1:
        other = merger.fork()
        try:
            out, origin = other.assemble(other.anchor(forced=(edge, places[0])))
            check_weak_blocks(other)
            check_unmatched_edges(other)
        except Abstain:
            pass
        else:
            if other.sm[edge] == places[0]:
                return other, out, origin
    raise ReadAgain("a block's edge line is in the original but the block was placed elsewhere",
                    merger.sk.span(edge, edge))


def merge(original: str, sketch: str, language: str | None, options: ApplyOptions,
          weights: Weights = DEFAULT_WEIGHTS) -> Merge:
    """Merge ``sketch`` into ``original``; raises ``Abstain`` when it cannot do so safely
    (its span counted in ``sketch``'s own lines, a fence and the prose above it included)."""
    body, dropped = sketch_text(sketch, original)
    try:
        try:
            return _merge(original, body, language, options, weights)
        except Abstain as exc:
            if isinstance(exc, ReadAgain):
                decided = _new_code_copies(original, body, language, options, weights, exc.gone)
            elif exc.reason == HEAD_UNSAID:
                decided = _head_by_use(original, body, language, options, weights)
            else:
                raise
            if decided is None:
                raise
            return decided
    except Abstain as exc:
        if dropped and exc.span is not None:
            exc.span = (exc.span[0] + dropped, exc.span[1] + dropped)
        raise


def _new_code_copies(original: str, sketch: str, language: str | None, options: ApplyOptions,
                     weights: Weights, gone: tuple[int, int]) -> Merge | None:
    """A sketch whose first reading was refused where it may have put new lines on old ones
    (``ReadAgain``: a deletion between two lines not certainly placed, a block that also
    reads as inserted whole, anchors that disagree, an edge line left unmatched, a new unit
    repeating its neighbour), read again with the lines of the definitions it adds (names
    the original does not define) kept new whatever old lines they equal. A new test's
    ``def cli():``, a new class's ``pass`` or a new function's ``}`` copies a line of the
    file, and placed on it the new definition splits around code it then deletes. The
    second reading stands where it passes every check and the sketch does not show the old
    code replaced after all (``_copied_definition``, ``_copies_beside``, ``_orphaned``);
    else the first refusal does (``None``). ``gone``: the original lines the first reading
    deleted (the first, and one past the last; empty where none)."""
    try:
        return _merge(original, sketch, language, options, weights, again=gone)
    except Abstain:
        return None


_NOT_NEW = "the sketch's new definitions, read as new, leave the code they replace"
_BESIDE = 8  # merged lines: a copy this near the old line it equals is that line rewritten


def _copies_beside(merger: Merger, out: list[str], origin: list[int]) -> bool:
    """Whether a line of the new definitions, one the original has once (a line every test
    repeats says nothing), lands within ``_BESIDE`` lines of that original line, kept: new
    code written beside the old code it copies rewrites it (an anonymous function's body
    moved into a named function where it stands), and the first reading's deletion there
    may be meant."""
    sk = merger.sk
    copied = {sk.keys[j] for j in merger.new_lines
              if not weak(sk.keys[j]) and len(merger.pos.get(sk.keys[j], ())) == 1}
    if not copied:
        return False
    kept = [(i, merger.ok[o]) for i, o in enumerate(origin) if o >= 0 and merger.ok[o] in copied]
    return any(o < 0 and abs(i - k) <= _BESIDE and out[i].strip() == key
               for i, o in enumerate(origin) for k, key in kept)


_COPIED = 0.8  # share of a deleted definition's lines a new one repeats: the old one renamed
_COPIED_LINES = 5  # fewer body lines than this decide nothing (``def cli():`` / ``pass``)


def _copied_definition(merger: Merger, gone: tuple[int, int]) -> bool:
    """Whether a definition the first reading deleted (one opening in ``gone``, with at least
    ``_COPIED_LINES`` body lines with text, trivial ones aside) has ``_COPIED`` of them or
    more among the lines the sketch's new definitions hold: the sketch renamed it with its
    body kept, and read as new, the new one would stand beside the old."""
    new = {merger.sk.keys[j] for j in merger.new_lines}
    for p in range(*gone):
        if merger.ok[p] and definition_name(merger.ok[p], merger.language) is not None:
            end = merger.definition_end(p, merger.n)
            body = [key for key in merger.ok[p + 1:end] if not weak(key)]
            copied = sum(key in new for key in body)
            if len(body) >= _COPIED_LINES and copied >= _COPIED * len(body):
                return True
    return False


def _orphaned(merger: Merger, out: list[str], origin: list[int],
              gone: tuple[int, int]) -> bool:
    """Whether a definition the first reading deleted (one opening in ``gone``) is kept
    here with its name no longer used anywhere else in the merged file, though the
    original used it: the sketch rewrote its callers to the new definition, so the new
    one replaces it (a function renamed where it stands), and keeping both is wrong."""
    for p in range(*gone):
        found = definition_name(merger.ok[p], merger.language) if merger.ok[p] else None
        if found is None or p not in origin:
            continue
        end = merger.definition_end(p, merger.n)
        word = re.compile(rf"(?<![\w$]){re.escape(found[1])}(?![\w$])")
        if not any(word.search(line) for q, line in enumerate(merger.ok)
                   if not p <= q < end):
            continue  # never used by name in the original (a test, an exported hook)
        if end - 1 not in origin:
            continue
        start, stop = origin.index(p), origin.index(end - 1)
        if not any(word.search(line) for i, line in enumerate(out) if not start <= i <= stop):
            return True
    return False


def _head_by_use(original: str, sketch: str, language: str | None, options: ApplyOptions,
                 weights: Weights) -> Merge | None:
    """A sketch that opens below import lines it does not show, with no marker above, read
    both ways (the head kept; deleted, the sketch starting the file): the head kept where
    deleting it would leave a name the code still reads unbound (``usage.head_choice``),
    both readings pass every check and they give the same file but for the head; ``None``
    (the abstain stands) otherwise."""
    if language not in USAGE_LANGUAGES:
        return None  # no code to read: the two merges would decide nothing
    try:
        drop = _merge(original, sketch, language, options, weights, head="delete")
        keep = _merge(original, sketch, language, options, weights, head="keep")
    except Abstain:
        return None
    hidden = set(keep.origin) - set(drop.origin) - {-1}
    if [line for line, o in zip(keep.out, keep.origin) if o not in hidden] != drop.out:
        return None  # the readings differ beyond the head: more than the head is in doubt
    if head_choice(keep.lines.raw, hidden, drop.out, split_lines(sketch).raw,
                   language) == "keep":
        return keep
    return None


def _merge(original: str, sketch: str, language: str | None, options: ApplyOptions,
           weights: Weights, head: str | None = None,
           again: tuple[int, int] | None = None) -> Merge:
    """One reading of the sketch; ``head`` reads a sketch with no first marker as keeping
    or deleting the file's head, ``again`` is ``_new_code_copies``' second reading (the
    original lines the first one deleted)."""
    olines = split_lines(original)
    slines = split_lines(sketch)
    okeys = set(olines.keys)
    sk = SketchLines(slines, okeys, language)
    if not any(k for j, k in enumerate(sk.keys) if sk.kinds[j] == LineKind.CODE) and not any(
        kind == LineKind.REMOVE for kind in sk.kinds
    ):
        raise Abstain("the sketch has no code, only markers", (1, max(len(slines.raw), 1)))
    merger = Merger(olines, sk, language, options, weights)
    merger.head_keeps = head == "keep"
    merger.head_deletes = head == "delete"
    if again is not None:
        merger.new_lines = frozenset(new_definitions(merger, 0, merger.m))
        if not merger.new_lines or _copied_definition(merger, again):
            raise Abstain(_NOT_NEW)
    fixed = merger.anchor()
    out, origin = merger.assemble(fixed)
    if merger.blank_guesses and out == olines.raw:
        # Read as noise, the sketch's shorter blank runs leave it changing nothing, and a
        # sketch that changes nothing is not sent: the blank lines are the edit.
        merger, out, origin = _reread(merger, out, origin, keep_short_blanks=False)
    if out == olines.raw and sk.kinds[0] == IMPLICIT:
        merger, out, origin = _as_file_start(merger, out, origin)
    if out == olines.raw and sk.kinds[-1] == IMPLICIT:
        merger, out, origin = _as_file_end(merger, out, origin)
    if again is not None and (_copies_beside(merger, out, origin)
                              or _orphaned(merger, out, origin, again)):
        raise Abstain(_NOT_NEW)
    quiet = _blank_runs_only(merger)
    if quiet:
        # A block whose one change, read with its shorter blank runs kept, would be none: a
        # block is written for a change, so those blank runs are it (the whole-sketch case
        # above, per block).
        merger, out, origin = _reread(merger, out, origin, literal_lines=quiet)
    check_weak_blocks(merger)
    edge = unmatched_edge(merger)
    if edge is not None:
        merger, out, origin = _edge_as_context(merger, *edge)
    check_insertion_reading(merger)
    check_copied_edges(merger)
    check_closed_up_context(merger)
    check_context_elsewhere(merger)
    check_context_split(merger, origin)
    check_blank_edge_context(merger, origin)
    check_replaced_imports(merger, out)
    check_reindent_elsewhere(merger)
    if merger.searched and weights is DEFAULT_WEIGHTS:
        check_near_ties(out, merger)
    if (options.cross_check and weights is DEFAULT_WEIGHTS
            and len(sk.keys) * (len(olines.keys) + 1) <= _align.MAX_CELLS):
        other = cross_check(out, olines, sk, language, options, merger)
        if other is not None:
            out, origin = other
    final_newline = olines.final_newline
    if _sketch_ends_file(merger, origin):
        final_newline = slines.final_newline  # the sketch wrote the file's last line
    return Merge(
        lines=olines,
        out=out,
        origin=origin,
        deleted_by_context=merger.deleted_by_context,
        deleted_by_remove=merger.deleted_by_remove,
        fuzzy=merger.fuzzy,
        blank_guesses=merger.blank_guesses,
        final_newline=final_newline,
    )
