"""The sketch-to-diff applier: a lazy edit sketch in, the exact full file and a diff out.

``apply_sketch`` is the deterministic merge (line anchors first, structure where they cannot
decide) that abstains instead of guessing; ``make_sketch`` writes lazy sketches of a real
edit; ``ApplySpecialist`` is the registry specialist (kind ``"apply"``) with an optional
model-based fallback decoded by speculative edits. ``classify`` (what a sketch line is: code,
marker, ``remove`` comment), ``edit_new_lines`` (what an answer in another edit format,
a diff or SEARCH/REPLACE blocks, writes), ``language_for_path`` and ``has_parse_error`` are
the pieces other parts (the edit cascade's checks) may build on; the rest is internal.
"""

from specialists.apply.applier import FileEdit, apply_many, apply_sketch, combined_diff
from specialists.apply.checks import has_parse_error
from specialists.apply.edits import edit_names, edit_new_lines, replace_lines
from specialists.apply.languages import language_for_path
from specialists.apply.markers import LineKind, MarkerInfo, classify
from specialists.apply.result import ApplyOptions, ApplyResult
from specialists.apply.sketch import Sketch, make_sketch
from specialists.apply.specialist import ApplySpecialist

__all__ = [
    "ApplyOptions",
    "ApplyResult",
    "ApplySpecialist",
    "FileEdit",
    "LineKind",
    "MarkerInfo",
    "Sketch",
    "apply_many",
    "apply_sketch",
    "classify",
    "combined_diff",
    "edit_names",
    "edit_new_lines",
    "has_parse_error",
    "language_for_path",
    "make_sketch",
    "replace_lines",
]
