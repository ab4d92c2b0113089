"""The sketch as the merge reads it: each line's kind (code, marker, ``remove`` comment),
the markers it left out at its ends, and the per-line facts the placement needs (indent
widths, separator counts, which lines anchor a block's edges)."""

from __future__ import annotations

from specialists.apply.languages import definitions_of
from specialists.apply.markers import LineKind, MarkerInfo, classify
from specialists.apply.text import Lines, indent_widths

__all__ = ["IMPLICIT", "SketchLines"]

IMPLICIT = 3  # a marker the sketch left out before its first or after its last block


class SketchLines:
    """The sketch's lines with their kinds and what the DP needs to know about them."""

    def __init__(self, lines: Lines, okeys: set[str], language: str | None = None) -> None:
        self.raw = lines.raw
        self.keys = list(lines.keys)
        self.kinds: list[int] = []
        self.infos: list[MarkerInfo | None] = []
        defined: set[str] | None = None
        for key in self.keys:
            kind, info = classify(key, language)
            if kind != LineKind.CODE and key in okeys:
                kind, info = LineKind.CODE, None  # an existing comment, not a marker
            elif kind == LineKind.REMOVE and info is not None and info.remove_name \
                    and not info.remove_quotes:
                if defined is None:
                    defined = {name for _, name in definitions_of(okeys, language)}
                if info.remove_name.split(".")[-1].rstrip("()") not in defined:
                    # "Remove all entries in this case": a comment the new code carries,
                    # not an instruction (it names nothing the file defines)
                    kind, info = LineKind.CODE, None
            self.kinds.append(kind)
            self.infos.append(info)
        self.final_newline = lines.final_newline
        self.indent_char = lines.indent_char
        # (sketch line, region, threshold) -> [(similarity, original line)], best first
        self.similar_lines: dict[tuple[int, int, int, float], list[tuple[float, int]]] = {}
        self._add_implicit_markers()
        self.widths = indent_widths(self.raw)
        seps = [0]
        for kind in self.kinds:
            seps.append(seps[-1] + (kind != LineKind.CODE))
        self.sep_prefix = seps
        self.boundary = self._boundaries()
        # Blank lines in a block's edge run (between its edge line and its first non-blank
        # line): weak anchors too, so a run of blank lines lands on the same run.
        self.edge_blank = [False] * len(self.keys)
        for order in (range(len(self.keys)), range(len(self.keys) - 1, -1, -1)):
            after_sep = True
            for j in order:
                if self.kinds[j] != LineKind.CODE:
                    after_sep = True
                elif self.keys[j]:
                    after_sep = False
                elif after_sep:
                    self.edge_blank[j] = True

    def _add_implicit_markers(self) -> None:
        """A sketch that starts (ends) with code may have dropped its first (last) marker, or
        be a whole file: either way an implicit marker there lets the lines before its first
        anchor be kept, or replaced when its first lines are new (see
        ``expansion._emit_single_sep``)."""
        code = [j for j, k in enumerate(self.kinds) if k == LineKind.CODE and self.keys[j]]
        seps = [j for j, k in enumerate(self.kinds) if k != LineKind.CODE]
        first_sep = seps[0] if seps else len(self.kinds)
        last_sep = seps[-1] if seps else -1
        if code and code[-1] > last_sep:
            self._insert(len(self.keys))
        if code and code[0] < first_sep:
            self._insert(0)

    def _insert(self, at: int) -> None:
        self.raw.insert(at, "")
        self.keys.insert(at, "")
        self.kinds.insert(at, IMPLICIT)
        self.infos.insert(at, None)

    def _boundaries(self) -> list[bool]:
        """Lines that anchor a block next to a separator: its first and last line, and its
        first and last non-blank line (a blank edge line alone anchors weakly)."""
        n = len(self.keys)
        flags = [False] * n
        for order in (range(n), range(n - 1, -1, -1)):
            state = 2  # 2: right after a separator; 1: saw the blank edge line; 0: done
            for j in order:
                if self.kinds[j] != LineKind.CODE:
                    state = 2
                elif state:
                    if state == 2 or self.keys[j]:
                        flags[j] = True
                    state = 1 if (state == 2 and not self.keys[j]) else 0
        return flags

    def sep_between(self, ja: int, jb: int) -> bool:
        """Whether a marker or remove comment lies strictly between sketch lines ja and jb."""
        return self.sep_prefix[jb] - self.sep_prefix[ja + 1] > 0

    def span(self, j0: int, j1: int) -> tuple[int, int]:
        """1-based inclusive span in the caller's sketch (implicit markers removed)."""
        j0 = max(j0, 0)
        j1 = min(max(j1, j0), len(self.keys) - 1)
        implicit_before = 1 if self.kinds and self.kinds[0] == IMPLICIT else 0
        last = len(self.keys) - implicit_before - (1 if self.kinds[-1] == IMPLICIT else 0)
        a = min(max(j0 - implicit_before, 0) + 1, max(last, 1))
        b = min(max(j1 - implicit_before, 0) + 1, max(last, 1))
        return (a, max(a, b))
