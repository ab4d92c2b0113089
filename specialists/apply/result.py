"""What the applier returns, and the exception it uses internally to abstain."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Abstain", "ApplyOptions", "ApplyResult"]


class Abstain(Exception):
    """Raised inside the applier when it cannot place part of a sketch with certainty."""

    def __init__(self, reason: str, span: tuple[int, int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.span = span


class ReadAgain(Abstain):
    """An abstain where the reading may have placed lines of a definition the sketch adds
    on old lines they only copy: ``merge`` reads the sketch again with those lines kept new
    (``merge._new_code_copies``). ``gone``: the original lines the first reading deleted
    (the first, and one past the last), empty where it deleted none."""

    def __init__(self, reason: str, span: tuple[int, int] | None,
                 gone: tuple[int, int] = (0, 0)) -> None:
        super().__init__(reason, span)
        self.gone = gone


@dataclass(frozen=True)
class ApplyOptions:
    """Knobs of the deterministic applier; the defaults are what the benchmark measures."""

    max_delete_share: float = 0.3
    """Abstain when lines deleted by context alone exceed this share of the original's
    non-blank lines (Continue's applier rejects results that remove over 30% of lines)."""
    min_delete_lines: int = 8
    """...and exceed this many lines, so small files can still lose a few lines."""
    parse_check: bool = True
    """Abstain when the edited regions parsed before and do not after (tree-sitter)."""
    fuzzy: bool = True
    """Place a block with no exact anchor (a modified line with no context) by similarity."""
    fuzzy_threshold: float = 0.6
    """Lowest similarity (difflib ratio; LCS ratio where the two lines pass 800 characters)
    for a fuzzy placement."""
    cross_check: bool = True
    """Also read the sketch by global alignment and abstain when the two readings give
    different files (roughly doubles the time per merge)."""
    max_lines: int = 200_000
    """Abstain on larger inputs instead of spending unbounded time."""
    tie_rewrite: bool = False
    """Where two placements of a block tie, take the one whose new lines rewrite old lines
    like them, by a clear margin (``gap_search.break_tie``). Off by default: more exact
    answers on the development projects, none on the held-out ones, and two more silent
    wrongs in the held-out third style (BENCHMARKS.md, issue 36)."""
    tie_file_end: bool = False
    """Where the tied block is the sketch's last, with no marker after it, take the later
    placement when it deletes nothing and leaves only blank lines after it (the block
    closes the file). Off by default: it reads a missing last marker as the file's end, a
    sketch-style convention; one more exact answer held out (BENCHMARKS.md, issue 36)."""
    reading_search: bool = False
    """Issue 36: where the rules abstain, search the other readings of the sketch, and answer
    any file (the rules' or a searched one) only when the learned scorer's probability that
    it is the intended file reaches ``scorer_threshold`` (``scorer``)."""
    scorer_threshold: float | None = None
    """The abstain threshold on that probability for a searched reading (where the rules
    abstained); ``None``: the one shipped with the weights (chosen on development sketches:
    ``train_scorer``)."""
    scorer_rules_threshold: float | None = None
    """The same for the rules' own answer; ``None``: the shipped one."""


@dataclass
class ApplyResult:
    """The merged file and its diff, or an abstain with the reason and the sketch lines at fault.

    ``span`` is 1-based and inclusive, in sketch lines.
    """

    status: str
    merged: str | None = None
    diff: str = ""
    reason: str | None = None
    span: tuple[int, int] | None = None
    path: str | None = None
    confidence: float = 1.0
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        return self.status == "applied"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"] = list(self.span) if self.span else None
        return data
