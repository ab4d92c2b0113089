"""Unified diffs that ``git apply`` accepts, built from the merge's own line mapping.

The merge knows which original line each merged line came from, so the diff needs no second
alignment (``difflib`` would redo in O(n·m) what the merge already decided).
"""

from __future__ import annotations

from typing import Iterator

__all__ = ["opcodes", "unified_diff"]

Opcode = tuple[str, int, int, int, int]  # (tag, a0, a1, b0, b1) as difflib's


def opcodes(origin: list[int], n_original: int) -> list[Opcode]:
    """``difflib``-style opcodes from the original index of each merged line (-1: new)."""
    ops: list[Opcode] = []
    a = b = 0
    size = len(origin)
    while b < size or a < n_original:
        if b < size and origin[b] == a:
            b0, a0 = b, a
            while b < size and origin[b] == a:
                a += 1
                b += 1
            ops.append(("equal", a0, a, b0, b))
            continue
        b0, a0 = b, a
        while b < size and origin[b] < 0:
            b += 1
        a = origin[b] if b < size else n_original
        tag = "replace" if a > a0 and b > b0 else ("delete" if a > a0 else "insert")
        ops.append((tag, a0, a, b0, b))
    return ops


def _grouped(ops: list[Opcode], context: int) -> Iterator[list[Opcode]]:
    """difflib.SequenceMatcher.get_grouped_opcodes, on precomputed opcodes."""
    if not ops:
        ops = [("equal", 0, 1, 0, 1)]
    codes = list(ops)
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if not length else start + 1},{length}"


def unified_diff(
    a: list[str], b: list[str], ops: list[Opcode], path: str = "file",
    a_newline: bool = True, b_newline: bool = True, context: int = 3,
) -> str:
    """A git-style unified diff of ``a`` → ``b`` (raw lines, no ``\\n``), or ``""`` if equal."""
    if all(op[0] == "equal" for op in ops) and (a_newline == b_newline or not a):
        return ""
    ops = _fix_final_line(ops, len(a), len(b), a_newline, b_newline)
    out = [f"diff --git a/{path} b/{path}\n", f"--- a/{path}\n", f"+++ b/{path}\n"]
    for group in _grouped(ops, context):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_lines(" ", a, i1, i2, a_newline))
                continue
            out.extend(_lines("-", a, i1, i2, a_newline))
            out.extend(_lines("+", b, j1, j2, b_newline))
    return "".join(out)


def _lines(sign: str, lines: list[str], lo: int, hi: int, final_newline: bool) -> Iterator[str]:
    for i in range(lo, hi):
        yield f"{sign}{lines[i]}\n"
        if i == len(lines) - 1 and not final_newline:
            yield "\\ No newline at end of file\n"


def _fix_final_line(ops: list[Opcode], na: int, nb: int, a_newline: bool, b_newline: bool) -> list[Opcode]:
    """A last line without newline can only be context if it is last, unchanged, on both sides."""
    fixed: list[Opcode] = []
    for tag, i1, i2, j1, j2 in ops:
        touches = (not a_newline and i2 == na) or (not b_newline and j2 == nb)
        if tag != "equal" or not touches or (i2 == na and j2 == nb and a_newline == b_newline):
            fixed.append((tag, i1, i2, j1, j2))
            continue
        if i2 - 1 > i1:
            fixed.append(("equal", i1, i2 - 1, j1, j2 - 1))
        fixed.append(("replace", i2 - 1, i2, j2 - 1, j2))
    return fixed
