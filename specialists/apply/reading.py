"""One reading of a sketch against the original: its state, and what only that state
answers (the matched pairs, the original's definitions).

The steps of a reading — ``anchoring``, ``gap_search``, ``expansion``, ``floating``,
``deletions`` — are functions of a ``Reading``; ``merger.Merger`` is a ``Reading`` with the
two steps that call them in order (``anchor``, ``assemble``) and the global reading
(``merge_dp``). The steps import this module, and ``merger`` imports the steps: imports run
one way (sketch → reading → steps → merger → merge), with no circle even for types.
"""

from __future__ import annotations

from itertools import compress
from operator import not_
from typing import Self

import numpy as np

from specialists.apply import languages
from specialists.apply.result import ApplyOptions
from specialists.apply.sketch_lines import SketchLines
from specialists.apply.text import Lines, indent_widths
from specialists.apply.weights import DEFAULT_WEIGHTS, Weights, deletion_costs

__all__ = ["Reading"]


class Reading:
    """One reading of a sketch: the original's and the sketch's lines, each sketch line's
    match (``sm``: original index or -1), and the counts the result reports. ``fork``
    starts another reading over the same inputs."""

    scount: dict[str, int]  # how often each code line occurs in the sketch (``unique_pairs``)

    def __init__(self, olines: Lines, sk: SketchLines, language: str | None, options: ApplyOptions,
                 weights: Weights = DEFAULT_WEIGHTS):
        self.wt = wt = weights
        self.searched = False  # whether a gap DP chose between placements
        self.o = olines
        self.ok = olines.keys
        self.sk = sk
        self.language = language
        self.options = options
        self.n = len(olines.keys)
        self.m = len(sk.keys)
        pos: dict[str, list[int]] = {}
        for i, key in enumerate(self.ok):
            if key in pos:
                pos[key].append(i)
            else:
                pos[key] = [i]
        pos.pop("", None)  # blank lines: ``blanks``
        self.pos = pos
        self.blanks = list(compress(range(self.n), map(not_, self.ok)))
        self.owidth = indent_widths(olines.raw)
        self.dcost = deletion_costs(self.ok, wt)
        self.np_arrays: tuple[np.ndarray, np.ndarray] | None = None
        self.sm = [-1] * self.m
        self.defs: set[tuple[str, str]] | None = None
        self.shift = 0
        self.shift_hint = 0  # the shift of the reading this one was forked from
        self.fuzzy = 0
        self.faithful = True
        # The near-tie runs only compare their output with this one's, which was checked.
        self.check_deletions = weights is DEFAULT_WEIGHTS
        self.dp_spans: dict[int, tuple[int, int]] = {}
        self.blank_guesses = 0
        # Keep a blank run the sketch wrote shorter (writers drop blank lines); off when
        # keeping them would leave the sketch changing nothing.
        self.keep_short_blanks = True
        # Sketch lines of blocks read literally (their shorter blank runs are the edit), and
        # the sketch line before each blank run kept as a dropped line (``assemble``).
        self.literal_lines: frozenset[int] = frozenset()
        self.guessed_at: list[int] = []
        self.deleted_by_context = self.deleted_by_remove = 0
        # (sketch line, original line) of each import placed by similarity over one from
        # the same module binding other names (``floating.check_replaced_imports``).
        self.replaced_imports: list[tuple[int, int]] = []
        # Read a sketch that starts with no marker as starting the file (``merge``).
        self.head_deletes = False
        self.tail_deletes = False  # and ending it
        # Read it as having forgotten its first marker: the head above stays (``merge``,
        # where the code decides between the two readings).
        self.head_keeps = False
        # Sketch lines read as new whatever original line they equal: the lines of
        # definitions the original does not have, on ``merge``'s second reading of a sketch
        # whose first reading deleted code around them (``merge._new_code_copies``).
        self.new_lines: frozenset[int] = frozenset()

    def fork(self, weights: Weights | None = None) -> Self:
        """A fresh merger over the same original and sketch, sharing what only depends on
        them (line positions, widths), for a second reading or other ``weights``."""
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        if weights is not None and weights != self.wt:
            other.wt = weights
            other.dcost = deletion_costs(self.ok, weights)
            other.np_arrays = None
        other.searched = False
        other.sm = [-1] * self.m
        other.defs = self.defs
        other.shift_hint = self.shift
        other.shift = 0
        other.fuzzy = 0
        other.faithful = True
        other.check_deletions = other.wt is DEFAULT_WEIGHTS
        other.dp_spans = {}
        other.blank_guesses = 0
        other.guessed_at = []
        other.deleted_by_context = other.deleted_by_remove = 0
        return other

    def fixed(self) -> list[tuple[int, int]]:
        """The matched (sketch line, original line) pairs, between (-1, -1) and (m, n)."""
        out = [(-1, -1)]
        out += [(j, p) for j, p in enumerate(self.sm) if p >= 0]
        out.append((self.m, self.n))
        return out

    def definitions(self) -> set[tuple[str, str]]:
        """``(kind, name)`` of the original's definitions (made once, shared by forks)."""
        if self.defs is None:
            self.defs = languages.definitions_of(self.ok, self.language)
        return self.defs

    def has_definition(self, found: tuple[str, str]) -> bool:
        return found in self.definitions()

    def definition_end(self, p: int, hi: int) -> int:
        """One past the last line of the definition that original line p opens."""
        return languages.definition_end(self.ok, self.owidth, p, hi, self.language)
