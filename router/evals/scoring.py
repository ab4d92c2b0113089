"""How an edit is scored against the real ``after`` file (issue 7).

- ``exact``: the merged file equals ``after`` byte for byte;
- ``exact_ws``: equal after normalising whitespace (trailing spaces, blank-line runs, the
  final newline), which forgives what a reviewer would not notice;
- ``changed_lines_right``: the share of the true change's lines the edit got right: the
  multiset of ``-``/``+`` lines of ``diff(before, after)`` intersected with those of
  ``diff(before, merged)``, over the larger of the two (so extra changes cost too).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter

__all__ = ["changed_lines_right", "exact", "exact_ws", "normalise_ws", "score"]

_BLANKS = re.compile(r"\n{3,}")


def exact(merged: str | None, after: str) -> bool:
    return merged is not None and merged == after


def normalise_ws(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip("\n")


def exact_ws(merged: str | None, after: str) -> bool:
    return merged is not None and normalise_ws(merged) == normalise_ws(after)


def _changes(before: str, after: str) -> Counter[str]:
    a, b = before.splitlines(), after.splitlines()
    out: Counter[str] = Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out.update("-" + line for line in a[i1:i2])
        out.update("+" + line for line in b[j1:j2])
    return out


def changed_lines_right(before: str, after: str, merged: str | None) -> float:
    if merged is None:
        return 0.0
    truth, got = _changes(before, after), _changes(before, merged)
    denom = max(sum(truth.values()), sum(got.values()))
    if denom == 0:
        return 1.0
    return sum((truth & got).values()) / denom


def score(before: str, after: str, merged: str | None) -> dict[str, float | bool]:
    return {"exact": exact(merged, after), "exact_ws": exact_ws(merged, after),
            "changed_lines_right": round(changed_lines_right(before, after, merged), 4)}
