"""The sketch-to-diff applier: a lazy edit sketch in, the exact full file and a diff out.

``apply_sketch`` is the deterministic merge (line anchors first, structure where they cannot
decide) that abstains instead of guessing; ``make_sketch`` writes lazy sketches of a real
edit; ``ApplySpecialist`` is the registry specialist (kind ``"apply"``) with an optional
model-based fallback decoded by speculative edits.
"""

from specialists.apply.applier import FileEdit, apply_many, apply_sketch, combined_diff
from specialists.apply.result import ApplyOptions, ApplyResult
from specialists.apply.sketch import Sketch, make_sketch
from specialists.apply.specialist import ApplySpecialist

__all__ = [
    "ApplyOptions",
    "ApplyResult",
    "ApplySpecialist",
    "FileEdit",
    "Sketch",
    "apply_many",
    "apply_sketch",
    "combined_diff",
    "make_sketch",
]
