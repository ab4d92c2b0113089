"""Sketch regions for the learned fallback: where each part of a sketch belongs, as a window.

A sketch is read as *blocks* (runs of code or ``remove`` lines between markers or a file
edge). Each block is anchored by its lines that occur in the original (each at most
``MAX_OCCURRENCES`` times): the densest cluster of those occurrences, padded by ``PAD``
lines, is its *window*. Windows that touch or overlap are joined into one *region*; a
region's sketch *segment* is the sketch from its first block to its last, with the marker
on either side when there is one. The model (``fallback``) rewrites one region at a time
from (region of the original, segment) to the region's final text; the same function cuts
the training examples (``train_fallback``), so training and use see the same windows.

No model here: pure string work, used by both.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from specialists.apply.markers import LineKind, classify

__all__ = ["Region", "lines_of", "regions", "region_target", "splice",
           "ORIG", "SKETCH", "MERGED", "END", "SPECIAL_TOKENS", "format_prompt"]

PAD = 2
MAX_OCCURRENCES = 4
MIN_KEY = 4  # shorter stripped lines (")", "}", "else:") are not anchors on their own

ORIG, SKETCH, MERGED, END = "<|orig|>", "<|sketch|>", "<|merged|>", "<|end|>"
SPECIAL_TOKENS = (ORIG, SKETCH, MERGED, END)


def format_prompt(region: str, segment: str) -> str:
    return f"{ORIG}{region}{SKETCH}{segment}{MERGED}"


def lines_of(text: str) -> list[str]:
    """Lines with their ``\\n`` kept (only ``\\n`` splits), so ``"".join`` gives ``text`` back."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


@dataclass(frozen=True)
class Region:
    """Original lines ``[start, end)`` and the sketch lines ``[s_start, s_end)`` that rewrite them."""

    start: int
    end: int
    s_start: int
    s_end: int
    blocks: int

    def original_text(self, olines: list[str]) -> str:
        return "".join(olines[self.start:self.end])

    def segment_text(self, slines: list[str]) -> str:
        return "".join(slines[self.s_start:self.s_end])


def _blocks(kinds: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    j = 0
    while j < len(kinds):
        if kinds[j] == LineKind.MARKER:
            j += 1
            continue
        k = j
        while k < len(kinds) and kinds[k] != LineKind.MARKER:
            k += 1
        out.append((j, k))
        j = k
    return out


def _window(block_keys: list[str], index: dict[str, list[int]]) -> tuple[int, int] | None:
    """The densest cluster of the block's anchor occurrences, as original lines [lo, hi]; None
    when no line anchors or two separate clusters tie."""
    pairs = sorted((pos, j) for j, key in enumerate(block_keys) if len(key) >= MIN_KEY
                   for pos in index.get(key, ())[:MAX_OCCURRENCES + 1]
                   if len(index.get(key, ())) <= MAX_OCCURRENCES)
    if not pairs:
        return None
    span = 2 * len(block_keys) + 10
    best: list[tuple[int, int, int]] = []  # (score, lo, hi)
    for a in range(len(pairs)):
        seen: set[int] = set()
        hi = pairs[a][0]
        for b in range(a, len(pairs)):
            if pairs[b][0] - pairs[a][0] > span:
                break
            seen.add(pairs[b][1])
            hi = pairs[b][0]
        score = len(seen)
        if not best or score > best[0][0]:
            best = [(score, pairs[a][0], hi)]
        elif score == best[0][0]:
            best.append((score, pairs[a][0], hi))
    # clusters that overlap the first best one are the same place read from another start
    first = best[0]
    for _, lo, hi in best[1:]:
        if lo > first[2] + span:
            return None
    lo = min(b[1] for b in best if b[1] <= first[2] + span)
    hi = max(b[2] for b in best if b[1] <= first[2] + span)
    return lo, hi


def regions(original: str, sketch: str, language: str | None) -> list[Region] | None:
    """The sketch's regions in order, or None when a block cannot be placed or the blocks'
    windows come out of order."""
    olines, slines = lines_of(original), lines_of(sketch)
    if not olines or not slines:
        return None
    okeys = [line.strip() for line in olines]
    index: dict[str, list[int]] = {}
    for i, key in enumerate(okeys):
        if key:
            index.setdefault(key, []).append(i)
    kinds = [classify(line.strip(), language)[0] for line in slines]
    blocks = _blocks(kinds)
    if not blocks:
        return None
    windows: list[tuple[int, int, int, int]] = []
    for n, (j1, j2) in enumerate(blocks):
        keys = [slines[j].strip() for j in range(j1, j2) if kinds[j] == LineKind.CODE]
        w = _window(keys, index)
        if w is None:
            return None
        lo, hi = max(0, w[0] - PAD), min(len(olines), w[1] + 1 + PAD)
        if n == 0 and j1 == 0 and lo <= (j2 - j1) + 10:
            lo = 0  # no marker before the first block: it starts the file
        if n == len(blocks) - 1 and j2 == len(slines) and len(olines) - hi <= (j2 - j1) + 10:
            hi = len(olines)
        s_lo = j1 - 1 if j1 > 0 else j1
        s_hi = j2 + 1 if j2 < len(slines) else j2
        windows.append((lo, hi, s_lo, s_hi))
    out: list[list[int]] = []
    for lo, hi, s_lo, s_hi in windows:
        if out and lo < out[-1][0]:
            return None  # blocks out of order in the original
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
            out[-1][3] = s_hi
            out[-1][4] += 1
        else:
            out.append([lo, hi, s_lo, s_hi, 1])
    return [Region(*r) for r in out]


def splice(original: str, parts: list[tuple[Region, str]]) -> str:
    """The original with each region's lines replaced by its new text."""
    olines = lines_of(original)
    out: list[str] = []
    cursor = 0
    for region, text in sorted(parts, key=lambda p: p[0].start):
        out.extend(olines[cursor:region.start])
        out.append(text)
        cursor = region.end
    out.extend(olines[cursor:])
    return "".join(out)


def region_target(before: str, after: str, region: Region,
                  opcodes: Sequence[tuple[str, int, int, int, int]] | None = None
                  ) -> tuple[Region, str] | None:
    """The region grown to whole changes of the edit before -> after, and its final text;
    None when it would grow to a change it does not show (training labels only)."""
    blines, alines = lines_of(before), lines_of(after)
    if opcodes is None:
        opcodes = list(difflib.SequenceMatcher(None, blines, alines, autojunk=False).get_opcodes())
    s, e = region.start, region.end
    changes = [op for op in opcodes if op[0] != "equal"]
    grown = True
    while grown:
        grown = False
        for _, i1, i2, _, _ in changes:
            touches = (i1 < e and i2 > s) if i2 > i1 else (s <= i1 <= e)
            if touches and (i1 < s or i2 > e):
                s, e = min(s, i1), max(e, i2)
                grown = True
    if (s, e) != (region.start, region.end):
        return None
    a_start: int | None = None
    a_end: int | None = None
    for tag, i1, i2, j1, j2 in opcodes:
        if a_start is None and (i1 == s or (tag == "equal" and i1 <= s < i2)):
            a_start = j1 + (s - i1 if tag == "equal" else 0)
        if i2 == e or (tag == "equal" and i1 < e < i2):
            a_end = j1 + (e - i1) if tag == "equal" else j2
    if a_start is None:
        a_start = len(alines)
    if a_end is None or a_end < a_start:
        a_end = a_start
    return region, "".join(alines[a_start:a_end])
