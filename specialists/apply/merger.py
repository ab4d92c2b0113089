"""A reading of a sketch with its two steps: ``anchor`` (where each sketch line goes) and
``assemble`` (the merged lines). ``merge_dp`` is the second, global reading the
cross-check compares with (``align``).

The reading's state is ``reading.Reading``; the steps' work lives in modules of their own,
as functions of a reading: ``anchoring`` (the skeleton of unique lines), ``gap_search``
(the DP between anchors), ``expansion`` and ``floating`` (the lines markers stand for, and
pieces placed between markers), ``deletions`` (``remove`` comments and deletion by
context). They import ``reading``, not this module.
"""

from __future__ import annotations

from specialists.apply import align as _align
from specialists.apply.anchoring import (check_dropped_anchors, estimate_shift, extend,
                                         faithful_indentation, heaviest_chain, unique_pairs, weak)
from specialists.apply.deletions import check_implicit_deletion, remove_candidates
from specialists.apply.expansion import emit_gap, emit_matched
from specialists.apply.gap_search import align_gap
from specialists.apply.markers import LineKind, MarkerInfo
from specialists.apply.reading import Reading
from specialists.apply.result import Abstain

__all__ = ["AMBIGUOUS", "Merger"]

# ``merge_dp``'s abstains when its earliest and latest optimal alignments give different
# files: with different code in them, or with the same code and other blank lines.
AMBIGUOUS = "ambiguous: the sketch reads as well in more than one place"
AMBIGUOUS_BLANKS = "ambiguous: the sketch's blank lines read as well in more than one place"
# The global alignment's key for a line read as new (``Reading.new_lines``): no original
# line has it.
_NEW_KEY = "\x00new"


def _text_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip()]


class Merger(Reading):
    """A reading with its steps: ``anchor`` (the piecewise placement), ``assemble`` (the
    merged lines) and ``merge_dp`` (the global reading the cross-check compares with)."""

    def anchor(self, forced: tuple[int, int] | None = None) -> list[tuple[int, int]]:
        """The piecewise reading's placement: the skeleton of unique lines (``anchoring``),
        then the gap search between each two anchors (``gap_search``); returns the fixed
        (sketch line, original line) pairs, bracketed by (-1, -1) and (m, n). A ``forced``
        pair joins the skeleton whatever the other anchors say."""
        sk = self.sk
        pairs = [(j, p, self.wt.boundary if sk.boundary[j] else 1.0)
                 for j, p in unique_pairs(self)]
        if forced is not None:
            pairs = [pair for pair in pairs if pair[0] != forced[0] and pair[1] != forced[1]]
            pairs.append((*forced, sum(w for _, _, w in pairs) + 1.0))
            pairs.sort()
        skeleton = heaviest_chain(pairs, self.n)
        check_dropped_anchors(self, pairs, skeleton)
        for j, p in skeleton:
            self.sm[j] = p
        self.shift = estimate_shift(self, skeleton)
        extend(self)
        fixed = self.fixed()
        for (ja, pa), (jb, pb) in zip(fixed, fixed[1:]):
            if jb - ja > 1:
                align_gap(self, ja, pa, jb, pb)
        extend(self)
        if not skeleton:
            # No line found once in each to read the sketch's indentation shift from: read
            # it from every line placed (a sketch indented 2 deeper throughout whose
            # context lines all repeat in the file, ``on_setattr=None,`` / ``):``).
            self.shift = estimate_shift(self, [(j, p) for j, p in enumerate(self.sm) if p >= 0])
        self.faithful = faithful_indentation(self)
        return self.fixed()

    def global_alignments(self, costs: _align.Costs | None = None
                          ) -> tuple[_align.Alignment, _align.Alignment]:
        """The global alignment's earliest and latest optimal readings (``align``), with
        this reading's shift set for them; abstains when a remove comment names code the
        original lacks or the sketch cannot be aligned at all."""
        sk = self.sk
        pairs = unique_pairs(self)
        # With no unique line, the shift the piecewise reading found from its placed lines
        # (``anchor``), if this reading is its fork; a shift of 0 would re-indent them all.
        self.shift = estimate_shift(self, pairs) if pairs else self.shift_hint
        removes: dict[int, list[tuple[int, int]]] = {}
        for j, kind in enumerate(sk.kinds):
            if kind == LineKind.REMOVE:
                found = remove_candidates(self, sk.infos[j] or MarkerInfo())
                if not found:
                    raise Abstain("the remove comment names code that is not in the original",
                                  sk.span(j, j))
                removes[j] = found
        try:
            keys = sk.keys
            if self.new_lines:  # a key no original line has: these lines stay new
                keys = [_NEW_KEY if j in self.new_lines else key for j, key in enumerate(keys)]
            return _align.align(self.ok, self.owidth, keys, sk.kinds, sk.widths,
                                self.shift, removes, weak, costs)
        except ValueError:
            raise Abstain("the sketch cannot be read against the original") from None

    def merge_dp(self, costs: _align.Costs | None = None) -> tuple[list[str], list[int]]:
        """Anchor by the global alignment (``align``) and assemble; abstain when the earliest
        and the latest optimal alignments give different files."""
        sk = self.sk
        early, late = self.global_alignments(costs)
        self.check_deletions = False
        results = []
        for al in (early, late):
            self.sm = list(al.sm)
            self.dp_spans = al.spans
            self.faithful = faithful_indentation(self)
            results.append(self.assemble(self.fixed()))
            if al.sm == late.sm and al.spans == late.spans:
                break
        if len(results) == 2 and results[0][0] != results[1][0]:
            diff = [j for j in range(self.m) if early.sm[j] != late.sm[j]]
            span = sk.span(diff[0], diff[-1]) if diff else None
            if _text_lines(results[0][0]) == _text_lines(results[1][0]):
                raise Abstain(AMBIGUOUS_BLANKS, span)
            raise Abstain(AMBIGUOUS, span)
        return results[-1]

    def assemble(self, fixed: list[tuple[int, int]]) -> tuple[list[str], list[int]]:
        """The merged lines and the original index of each (-1: new), from the fixed pairs:
        each gap between two of them expanded (``expansion``), deletions by context checked
        (``deletions``)."""
        out: list[str] = []
        origin: list[int] = []
        self.deleted_by_context = 0
        self.deleted_by_remove = 0
        self.blank_guesses = 0
        self.guessed_at = []
        self.replaced_imports = []
        for (ja, pa), (jb, pb) in zip(fixed, fixed[1:]):
            if jb != ja + 1 or pb != pa + 1:  # (an empty gap deletes and writes nothing)
                check_implicit_deletion(self, ja, pa, jb, pb)
                emit_gap(self, ja, pa, jb, pb, out, origin)
            if jb < self.m:
                emit_matched(self, jb, pb, out, origin)
        return out, origin
