"""A second, independent lazy-sketch generator: the styles frontier models write.

``specialists.apply.make_sketch`` (the "lines" generator) writes one house style. This
module writes what a frontier model writes when a prompt tells it to be lazy (Morph's and
Relace's tool prompts, Cursor's and Continue's edit prompts): it starts from the committed
file (``after``) and decides which of its lines to show, then writes a marker for every run
of lines it leaves out. Conventions, each drawn at random per sketch:

* marker spellings of every kind seen in the wild (``// ... existing code ...``,
  ``# ... rest of the file unchanged ...``, ``// ...``, ``/* ... */``, ``# (unchanged)``,
  ``// rest of code``, a bare ``...`` in brace languages, named keeps), one spelling per
  sketch or mixed;
* no leading marker when the shown code starts the file, no trailing one when it ends it;
* deletions shown by omission: the lines on both sides of a deletion are shown closed up
  (the context reaches past blank lines to a line with text, as a model shows the next
  definition's header), or, for a deleted definition, a ``remove``/``delete`` comment;
* kinds: ``context`` (k = 1-3 lines around each change), ``definition`` (the whole enclosing
  definition), ``inner`` (the enclosing definitions' headers with markers inside their
  bodies around the change: a class rewrite with inner markers), ``imports`` (a new import
  shown with no context at the file's top);
* noise: trailing whitespace on shown lines, a marker indented at another level.

The expected answer is always ``after``. ``label`` is ``unique`` when every line next to a
marker is an unchanged line found once in ``before`` (a file edge needs no anchor) and every
``remove`` comment names a definition defined once; otherwise ``ambiguous``.

    make_frontier_sketch(before, after, language, rng) -> FrontierSketch
"""

from __future__ import annotations

import difflib
import random
import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["FrontierSketch", "KINDS", "OUTLINE_KINDS", "OutlineSketch", "chat_answer",
           "make_frontier_sketch", "make_outline_sketch", "numbered_sketch", "reword_sketch"]

KINDS = ("context", "definition", "inner", "imports")

# Marker wordings. "{c}" is the language's comment; block-comment and bare spellings are
# written out whole.
_WORDINGS = (
    "... existing code ...", "... existing code", "...existing code...", "... rest of code ...",
    "... rest of the file unchanged ...", "...", "… existing code …", "(unchanged)",
    "rest of code", "... keep existing code ...", "... code remains the same ...",
    "existing code...", "... (unchanged) ...", "... other code unchanged ...",
)
_BODY_WORDINGS = ("... existing code ...", "... rest of the function ...", "...",
                  "... rest of method unchanged ...", "... (unchanged) ...",
                  "rest of body unchanged")
_DEF_WORDINGS = ("... other methods ...", "... existing methods ...", "... other functions ...",
                 "... existing functions ...")
_BLOCK = ("/* ... */", "/* ... existing code ... */", "/* ... rest of code ... */")
_REMOVE = ("removed {name}", "Removed: {name}", "delete {name}", "remove {name} (no longer used)",
           "Deleted {name}", "remove the {name} function")

_PY_DEF = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_GO_DEF = re.compile(r"^\s*(?:func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)|type\s+([A-Za-z_]\w*))")
_JS_DEF = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\s*\*?\s*([A-Za-z_$][\w$]*)"
    r"|class\s+([A-Za-z_$][\w$]*)"
    r"|(?:var|let|const)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>)"
    r"|([A-Za-z_$][\w$.]*)\s*=\s*(?:async\s+)?function\b)")
_IMPORT = re.compile(r"^(?:import\s|from\s+\S+\s+import\s|const\s+\w+\s*=\s*require\(|"
                     r"var\s+\w+\s*=\s*require\(|\s*\"[\w./-]+\"$)")


@dataclass
class FrontierSketch:
    text: str
    label: str  # "unique" or "ambiguous"
    kind: str  # one of KINDS
    context: str  # "1", "2", "3", "def" or "inner"
    noise: str  # "none", "trailing_ws", "marker_indent"
    deletions: str  # "none", "omission", "comment"
    leading_marker: bool
    trailing_marker: bool
    changed: bool  # False when the sketch could not be written in this kind


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _def_name(line: str, language: str) -> str | None:
    pattern = _PY_DEF if language == "python" else _GO_DEF if language == "go" else _JS_DEF
    m = pattern.match(line)
    if not m:
        return None
    return next((g for g in m.groups() if g), None)


def _comment(language: str) -> str:
    return "#" if language == "python" else "//"


def _marker(language: str, rng: random.Random, wording: str, indent: str, style: str) -> str:
    if language != "python":
        if style == "block":
            return indent + rng.choice(_BLOCK)
        if style == "bare":
            return indent + "..."
    return f"{indent}{_comment(language)} {wording}"


def _definition_range(lines: list[str], i: int, language: str) -> tuple[int, int] | None:
    """(header, end) of the innermost definition enclosing line i of ``lines`` (by
    indentation: the nearest shallower line opening a named definition)."""
    if not lines[i].strip():
        return None
    width = _indent(lines[i])
    for h in range(i, -1, -1):
        line = lines[h]
        if not line.strip():
            continue
        if (h == i or _indent(line) < width) and _def_name(line, language):
            return h, _block_end(lines, h, language)
        if _indent(line) < width:
            width = _indent(line)
            if width == 0 and not _def_name(line, language):
                return None
    return None


def _block_end(lines: list[str], h: int, language: str) -> int:
    """One past the last line of the definition opened at line h."""
    width = _indent(lines[h])
    end = h + 1
    # Python: decorators and multi-line signatures; brace languages: the closing brace.
    while end < len(lines):
        line = lines[end]
        if line.strip() and _indent(line) <= width:
            if language != "python" and line.strip()[0] in "})]":
                return end + 1
            if language == "python" and line.strip().startswith((")", "]")):
                end += 1
                continue
            return end
        end += 1
    return end


def _opcodes(before: list[str], after: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes, with each pure insertion or deletion slid to where a writer sees
    it (git's indent heuristic in small): among the equivalent places of a run of lines
    that repeats at its edges, the one whose first line has text at the least
    indentation, ending on a blank line if it can. Deleting ``f5`` between ``f4`` and
    ``f6`` is then ``def f5(x): ... <blank>``, not ``return value ... value = x + 5``."""
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    out = []
    for n, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag in ("delete", "insert") and 0 < n < len(ops) - 1:
            lines, lo, hi = (before, i1, i2) if tag == "delete" else (after, j1, j2)
            prev_len = ops[n - 1][2] - ops[n - 1][1]  # the equal runs around it
            next_len = ops[n + 1][2] - ops[n + 1][1]
            up = 0
            while up < prev_len and lo - up - 1 >= 0 and lines[lo - up - 1] == lines[hi - up - 1]:
                up += 1
            down = 0
            while (down < next_len and hi + down < len(lines)
                   and lines[lo + down] == lines[hi + down]):
                down += 1

            def score(d: int) -> tuple[int, int, int]:
                first, last = lines[lo + d], lines[hi + d - 1]
                return (0 if first.strip() else 1, _indent(first), 0 if not last.strip() else 1)

            best = min(range(-up, down + 1), key=lambda d: (score(d), abs(d)))
            if best:
                i1, i2, j1, j2 = ((i1 + best, i2 + best, j1 + best, j2 + best))
                # the equal runs around it move with it
                pt, pi1, pi2, pj1, pj2 = out[-1]
                out[-1] = (pt, pi1, pi2 + best, pj1, pj2 + best)
                nt, ni1, ni2, nj1, nj2 = ops[n + 1]
                ops[n + 1] = (nt, ni1 + best, ni2, nj1 + best, nj2)
        out.append((tag, i1, i2, j1, j2))
    return out


def _split(text: str) -> tuple[list[str], bool]:
    if text.endswith("\n"):
        return text[:-1].split("\n"), True
    return text.split("\n"), False


def make_frontier_sketch(before: str, after: str, language: str, rng: random.Random,
                         kind: str | None = None) -> FrontierSketch:
    """A lazy sketch of the edit ``before`` -> ``after`` in a frontier model's style."""
    blines, _ = _split(before)
    alines, final_nl = _split(after)
    n = len(alines)
    kind = kind or rng.choices(KINDS, weights=(5, 2, 2, 1))[0]
    k = rng.choice((1, 1, 2, 2, 3))
    noise = rng.choices(("none", "trailing_ws", "marker_indent"), weights=(6, 2, 2))[0]
    deletion_style = rng.choice(("omission", "omission", "comment"))
    marker_style = rng.choices(("line", "block", "bare"), weights=(8, 1, 1))[0]
    mixed = rng.random() < 0.25
    wording = rng.choice(_WORDINGS)
    nothing = FrontierSketch("", "ambiguous", kind, "-", noise, "none", False, False, False)

    ops = _opcodes(blines, alines)
    new_after: set[int] = set()  # after lines the commit wrote
    regions: list[tuple[str, int, int]] = []  # (tag, j1, j2) of each change, after indices
    deletion_points: list[tuple[int, int, int]] = []  # (after index, before lo, before hi)
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        regions.append((tag, j1, j2))
        new_after.update(range(j1, j2))
        if tag == "delete":
            deletion_points.append((j1, i1, i2))
    if before.endswith("\n") != after.endswith("\n"):
        new_after.add(n - 1)  # only the last line can show a changed final newline
        regions.append(("replace", n - 1, n))
    if not regions:
        return nothing

    shown: set[int] = set(new_after)

    def add_context(lo: int, hi: int, reach: int) -> None:
        """Show ``reach`` lines with text before lo and after hi (after indices), and the
        blank lines on the way, as a model shows the next definition's header."""
        a, got = lo - 1, 0
        while a >= 0 and got < reach:
            shown.add(a)
            got += bool(alines[a].strip())
            a -= 1
        b, got = hi, 0
        while b < n and got < reach:
            shown.add(b)
            got += bool(alines[b].strip())
            b += 1

    context_key = str(k)
    if kind == "imports":
        tops = {j for j in new_after if j < 40 and _IMPORT.match(alines[j].strip())}
        bare = [(t, j1, j2) for t, j1, j2 in regions
                if t == "insert" and all(j in tops for j in range(j1, j2))]
        if not bare:
            return nothing
        for t, j1, j2 in regions:
            if (t, j1, j2) not in bare:
                add_context(j1, j2, k)
        context_key = "0+" + str(k)
    else:
        for _, j1, j2 in regions:
            add_context(j1, j2, k)
    if kind in ("definition", "inner"):
        context_key = "def" if kind == "definition" else "inner"
        for _, j1, j2 in regions:
            found = _definition_range(alines, min(j1, n - 1), language) if n else None
            if found is None:
                continue
            h, end = found
            if kind == "definition":
                if end - h <= 80:
                    shown.update(range(h, end))
                continue
            # the enclosing headers with markers inside their bodies (a class rewrite)
            shown.add(h)
            if language != "python" and end - 1 > h and alines[end - 1].strip()[:1] in "})]":
                shown.add(end - 1)
            outer = _definition_range(alines, h - 1, language) if h > 0 else None
            if outer is not None and _indent(alines[outer[0]]) < _indent(alines[h]):
                shown.add(outer[0])
                if language != "python" and alines[outer[1] - 1].strip()[:1] in "})]":
                    shown.add(outer[1] - 1)

    # a deletion is shown closed up (both sides visible), or by a remove comment
    removes: dict[int, str] = {}  # after index -> name of the definition removed before it
    used_deletions = "none"
    for at, b_lo, b_hi in deletion_points:
        add_context(at, at, 1)
        gone = [line for line in blines[b_lo:b_hi] if line.strip()]
        top = min((_indent(x) for x in gone), default=0)
        heads = [line for line in gone if _indent(line) == top]
        name = _def_name(heads[0], language) if heads else None
        whole = name is not None and all(
            _def_name(h, language) == name or h.strip()[:1] in "})]@" for h in heads)
        if deletion_style == "comment" and whole and at < n:
            removes[at] = name or ""
            used_deletions = "comment"
        elif used_deletions == "none":
            used_deletions = "omission"

    # ---- write ------------------------------------------------------------------------
    order = sorted(j for j in shown if 0 <= j < n)
    if not order:
        return nothing
    leading = order[0] > 0
    trailing = order[-1] < n - 1
    bcount = Counter(line.strip() for line in blines)

    def anchor_ok(j: int) -> bool:
        """A line next to a marker that pins it: unchanged, with text, once in before."""
        return j not in new_after and bool(alines[j].strip()) and bcount[alines[j].strip()] == 1

    def marker_for(gap_lo: int, gap_hi: int) -> str:
        first = next((alines[j] for j in range(gap_lo, gap_hi) if alines[j].strip()), "")
        ind = first[:_indent(first)]
        if noise == "marker_indent" and rng.random() < 0.5:
            ind = "" if ind else "    "
        word = rng.choice(_WORDINGS) if mixed else wording
        if kind == "inner" and ind and rng.random() < 0.5:
            word = rng.choice(_BODY_WORDINGS + _DEF_WORDINGS)
        return _marker(language, rng, word, ind, marker_style)

    label = "unique"
    out: list[str] = []
    prev = -1
    for j in order:
        if j > prev + 1:  # a run of left-out lines: a marker (none before the file's start)
            if prev >= 0 and not anchor_ok(prev):
                label = "ambiguous"
            if not anchor_ok(j):
                label = "ambiguous"
            out.append(marker_for(prev + 1, j))
        if j in removes:
            ind = alines[j][:_indent(alines[j])] if alines[j].strip() else ""
            out.append(f"{ind}{_comment(language)} "
                       + rng.choice(_REMOVE).format(name=removes[j]))
            if sum(1 for line in blines if _def_name(line, language) == removes[j]) != 1:
                label = "ambiguous"
        line = alines[j]
        if noise == "trailing_ws" and line.strip() and j not in new_after and rng.random() < 0.3:
            line += rng.choice((" ", "  ", "\t"))
        out.append(line)
        prev = j
    if trailing:
        if not anchor_ok(prev):
            label = "ambiguous"
        out.append(marker_for(prev + 1, n))
    text = "\n".join(out)
    if trailing or final_nl:
        text += "\n"
    return FrontierSketch(text=text, label=label, kind=kind, context=context_key, noise=noise,
                          deletions=used_deletions, leading_marker=leading,
                          trailing_marker=trailing, changed=True)


# ---- a third style: terse outlines (issue 36) ---------------------------------------------
#
# Written for issue 36 before any change to the applier and kept out of its tuning: the
# applier's figures on it are measured at the start and at the end only. It differs from
# both generators above in what it shows and how it elides:
#
# * ``above``: each change with one line of text above it and none below, unless the change
#   deletes or replaces lines (then one line of text below too, to close the deletion);
# * ``signature``: each change inside a definition with that definition's header line only
#   (no decorator, no closing brace), a marker, one line of text on each side of the change;
# * ``outline``: the changed definition whole and its sibling definitions as an outline,
#   each sibling's header with its body elided by a marker (and its closing brace in brace
#   languages), code between the siblings elided too;
# * blank lines next to a marker are never shown (the marker stands for them);
# * its own marker wordings (``... snip ...``, ``[... unchanged ...]``, ``<existing code>``,
#   ``... (N lines unchanged) ...``), some of which no rule of the applier was written for;
#   a marker at the indentation of the line above it, or of the first line it stands for;
# * deletions by omission, or, for a whole definition, a note after the fact
#   (``# foo removed``, which no ``remove`` rule reads);
# * noise: no trailing marker although the file goes on, or two marker lines in a row.

OUTLINE_KINDS = ("above", "signature", "outline")
_OUTLINE_WORDINGS = (
    "... snip ...", "[... unchanged ...]", "<existing code>", "... ({n} lines unchanged) ...",
    "... same as before ...", "... keep as is ...", "...unchanged...", "(rest unchanged)",
    "... more code ...", "... (existing implementation) ...", "... (omitted for brevity) ...",
    "existing code here", "…", "... as before ...",
)
_OUTLINE_BODY = ("... body unchanged ...", "... implementation ...", "...", "... unchanged ...",
                 "[body omitted]")
_OUTLINE_NOTES = ("{name} removed", "{name}() was removed", "(deleted {name})", "dropped {name}")


@dataclass
class OutlineSketch:
    text: str
    label: str  # "unique" or "ambiguous"
    kind: str  # one of OUTLINE_KINDS
    noise: str  # "none", "no_trailing_marker", "double_marker"
    deletions: str  # "none", "omission", "note"
    changed: bool


def _siblings(alines: list[str], h: int, language: str) -> list[tuple[int, int]]:
    """(header, end) of the definitions at line h's indentation in its container (the
    enclosing definition's body, or the file's top level), in order."""
    width = _indent(alines[h])
    lo, hi = 0, len(alines)
    outer = _definition_range(alines, h - 1, language) if h > 0 and width else None
    if outer is not None and outer[0] < h < outer[1]:
        lo, hi = outer[0] + 1, outer[1]
    out = []
    j = lo
    while j < hi:
        line = alines[j]
        if line.strip() and _indent(line) == width and _def_name(line, language):
            end = _block_end(alines, j, language)
            out.append((j, max(end, j + 1)))
            j = max(end, j + 1)
            continue
        j += 1
    return out


def make_outline_sketch(before: str, after: str, language: str, rng: random.Random,
                        kind: str | None = None) -> OutlineSketch:
    """A lazy sketch of ``before`` -> ``after`` in the terse-outline style (see above)."""
    blines, _ = _split(before)
    alines, final_nl = _split(after)
    n = len(alines)
    kind = kind or rng.choice(OUTLINE_KINDS)
    noise = rng.choices(("none", "no_trailing_marker", "double_marker"), weights=(7, 2, 1))[0]
    note_deletions = rng.random() < 0.3
    mixed = rng.random() < 0.3
    wording = rng.choice(_OUTLINE_WORDINGS)
    marker_at_above = rng.random() < 0.5
    nothing = OutlineSketch("", "ambiguous", kind, noise, "none", False)

    ops = _opcodes(blines, alines)
    new_after: set[int] = set()
    regions: list[tuple[str, int, int]] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal":
            regions.append((tag, j1, j2))
            new_after.update(range(j1, j2))
    if before.endswith("\n") != after.endswith("\n") and n:
        new_after.add(n - 1)
        regions.append(("replace", n - 1, n))
    if not regions or not n:
        return nothing

    shown: set[int] = set(new_after)

    def text_above(j: int) -> None:
        a = j - 1
        while a >= 0:
            shown.add(a)
            if alines[a].strip():
                return
            a -= 1

    def text_below(j: int) -> None:
        b = j
        while b < n:
            shown.add(b)
            if alines[b].strip():
                return
            b += 1

    notes: dict[int, str] = {}
    used_deletions = "none"
    for tag, j1, j2 in regions:
        text_above(j1)
        if tag in ("delete", "replace"):
            text_below(j2)
    for tag, i1, i2, j1, j2 in ops:
        if tag != "delete":
            continue
        gone = [line for line in blines[i1:i2] if line.strip()]
        top = min((_indent(x) for x in gone), default=0)
        heads = [line for line in gone if _indent(line) == top]
        name = _def_name(heads[0], language) if heads else None
        whole = name is not None and all(
            _def_name(x, language) == name or x.strip()[:1] in "})]@" for x in heads)
        if note_deletions and whole and j1 < n:
            notes[j1] = name or ""
            used_deletions = "note"
        elif used_deletions == "none":
            used_deletions = "omission"

    if kind in ("signature", "outline"):
        for _, j1, j2 in regions:
            found = _definition_range(alines, min(j1, n - 1), language)
            if found is None:
                continue
            h, end = found
            if kind == "signature" or end - h > 60:
                shown.add(h)
                continue
            shown.update(range(h, end))
            for sh, send in _siblings(alines, h, language):
                if abs(sh - h) > 400 or sh == h:
                    continue
                shown.add(sh)
                last = alines[send - 1].strip() if send - 1 > sh else ""
                if language != "python" and last[:1] in "})]":
                    shown.add(send - 1)

    # blank lines next to an elided run are the marker's, unless the commit wrote them
    order = sorted(j for j in shown if 0 <= j < n)
    if not order:
        return nothing
    keep = set(order)
    changed_edges = True
    while changed_edges:
        changed_edges = False
        for j in sorted(keep):
            if alines[j].strip() or j in new_after:
                continue
            lo_gap = j > 0 and (j - 1) not in keep
            hi_gap = j < n - 1 and (j + 1) not in keep
            if lo_gap or hi_gap:
                keep.discard(j)
                changed_edges = True
    order = sorted(keep)
    if not order:
        return nothing

    bcount = Counter(line.strip() for line in blines)

    def anchor_ok(j: int) -> bool:
        return j not in new_after and bool(alines[j].strip()) and bcount[alines[j].strip()] == 1

    def marker_for(gap_lo: int, gap_hi: int, above: int) -> list[str]:
        first = next((alines[j] for j in range(gap_lo, gap_hi) if alines[j].strip()), "")
        ind = first[:_indent(first)]
        if marker_at_above and above >= 0:
            ind = alines[above][:_indent(alines[above])]
        word = rng.choice(_OUTLINE_WORDINGS) if mixed else wording
        if kind == "outline" and above >= 0 and _def_name(alines[above], language) \
                and gap_hi - gap_lo > 1:
            word = rng.choice(_OUTLINE_BODY)
            ind = first[:_indent(first)]
        word = word.replace("{n}", str(gap_hi - gap_lo))
        if language != "python" and word == "…":
            line = ind + "…"
        else:
            line = f"{ind}{_comment(language)} {word}"
        out = [line]
        if noise == "double_marker" and rng.random() < 0.5:
            out.append(f"{ind}{_comment(language)} ...")
        return out

    label = "unique"
    out: list[str] = []
    prev = -1
    for j in order:
        if j > prev + 1:
            if prev >= 0 and not anchor_ok(prev):
                label = "ambiguous"
            if not anchor_ok(j):
                label = "ambiguous"
            out += marker_for(prev + 1, j, prev)
        if j in notes:  # where the definition was
            ind = alines[j][:_indent(alines[j])] if alines[j].strip() else ""
            out.append(f"{ind}{_comment(language)} "
                       + rng.choice(_OUTLINE_NOTES).format(name=notes[j]))
            label = "ambiguous"
        out.append(alines[j])
        prev = j
    trailing = prev < n - 1
    if trailing:
        if not anchor_ok(prev):
            label = "ambiguous"
        if noise != "no_trailing_marker":
            out += marker_for(prev + 1, n, prev)
        else:
            label = "ambiguous"
    elif noise == "no_trailing_marker":
        noise = "none"
    text = "\n".join(out)
    if (trailing and noise != "no_trailing_marker") or final_nl:
        text += "\n"
    return OutlineSketch(text=text, label=label, kind=kind, noise=noise,
                         deletions=used_deletions, changed=True)


# -- reworded: the frontier style's sketches with fresh marker and deletion wordings ----------
#
# A development-only style for the applier's marker reading (issue 36): a sketch from
# ``make_frontier_sketch`` whose marker comments and ``remove`` comments are written again in
# wordings that no generator above uses, gathered from how chat models and edit tools word a
# lazy edit: bracketed or angle-bracketed placeholders, counts of lines left out, "for
# brevity", "stays the same", and deletions noted after the name. The lines' comment syntax,
# indentation and places are kept, so only the wording differs from the frontier sketch.
# The third style (``make_outline_sketch``) stays out of tuning; this one is for tuning.

_REWORD_MARKERS = (
    "... (existing code) ...", "[existing code]", "<rest of the code>", "[rest of file unchanged]",
    "(omitted for brevity)", "<unchanged>", "[snip]", "... elided ...", "{n} unchanged lines",
    "... {n} lines omitted ...", "rest as is", "... previous implementation ...",
    "--- unchanged ---", "[…]", "everything else stays the same", "remaining code is identical",
    "... untouched ...", "(code unchanged)", "<... existing ...>", "other code stays as it was",
)
_REWORD_NOTES = ("{name} deleted", "deleted: {name}", "{name}() has been removed",
                 "[removed {name}]", "removing {name}", "{name}: removed", "(remove {name})")
_BARE_WORDS = ("existing code", "rest of the code", "unchanged", "other methods unchanged",
               "snip", "code omitted")
_COMMENT_OPEN = re.compile(r"^(\{?\s*/\*+|//+|#+|<!--|--(?=\s))")


def reword_sketch(text: str, language: str, rng: random.Random) -> tuple[str, int]:
    """``text`` with each marker and named ``remove`` comment reworded (see above); one
    wording for the whole sketch, or (three times in ten) a fresh one per line; one sketch
    in five writes its markers with no comment at all (``... existing code ...``). Returns
    the new text and how many lines were reworded."""
    from specialists.apply.markers import LineKind, classify

    mixed = rng.random() < 0.3
    marker = rng.choice(_REWORD_MARKERS)
    note = rng.choice(_REWORD_NOTES)
    bare = rng.random() < 0.2  # markers with no comment at all: "... existing code ..."
    lines = text.split("\n")
    changed = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        opening = _COMMENT_OPEN.match(stripped)
        if not opening:
            continue  # a bare "..." stays as it is
        kind, info = classify(stripped, language)
        if kind == LineKind.CODE or info is None:
            continue
        indent = line[: len(line) - len(line.lstrip())]
        head = opening.group(1)
        tail = " */" + ("}" if head.startswith("{") else "") if "/*" in head else (
            " -->" if head == "<!--" else "")
        if kind == LineKind.MARKER and bare:
            lines[i] = f"{indent}... {rng.choice(_BARE_WORDS)} ..."
            changed += 1
            continue
        if kind == LineKind.MARKER:
            wording = (rng.choice(_REWORD_MARKERS) if mixed else marker).format(
                n=rng.randint(2, 40))
        elif info.remove_name:
            wording = (rng.choice(_REWORD_NOTES) if mixed else note).format(
                name=info.remove_name.rstrip("()"))
        else:
            continue
        lines[i] = f"{indent}{head} {wording}{tail}"
        changed += 1
    return "\n".join(lines), changed


# -- a sketch as a chat answer --------------------------------------------------------------

_FENCE_TAGS = {"python": "python", "javascript": "js", "go": "go", "typescript": "ts"}
_BEFORE_FENCE = ("Here is the updated code:", "Sure! Here's the change:",
                 "I've made the edit below.", "The fix:")
_AFTER_FENCE = ("This keeps everything else as it was.", "Let me know if you need anything else.",
                "", "The rest of the file is unchanged.")


def chat_answer(sketch: str, language: str, rng: random.Random, path: str | None = None) -> str:
    """``sketch`` as a chat model sends it back: in a Markdown fence (tagged with the
    language or not), headed by a comment naming the file one time in four where ``path``
    is given (``// filepath: src/app.js``, ``# app.py``), with a sentence above it two times
    in three and one below it half the time, and with CRLF line endings one time in three."""
    tag = _FENCE_TAGS.get(language, "") if rng.random() < 0.7 else ""
    if path and rng.random() < 0.25:
        named = rng.choice((f"filepath: {path}", path, path.rsplit("/", 1)[-1]))
        sketch = f"{_comment(language)} {named}\n{sketch}"
    text = f"```{tag}\n{sketch if sketch.endswith(chr(10)) else sketch + chr(10)}```\n"
    if rng.random() < 2 / 3:
        text = rng.choice(_BEFORE_FENCE) + "\n\n" + text
    if rng.random() < 0.5:
        text += "\n" + rng.choice(_AFTER_FENCE) + "\n"
    if rng.random() < 1 / 3:
        text = text.replace("\n", "\r\n")
    return text


_NUMBER_FORMATS = ("{n:6d}\t{line}", "{n:6d}→{line}", "{n}: {line}", "{n} | {line}", "L{n}: {line}")


def numbered_sketch(sketch: str, before: str, rng: random.Random) -> str:
    """``sketch`` as a model writes it after reading ``before`` through a numbered view
    (``cat -n``, an agent's file reader): each code line carries the number it has in
    ``before`` (the next free one for a new line), in one of five formats per sketch;
    marker lines carry none, or (one sketch in three) a number too."""
    from specialists.apply.markers import LineKind, classify

    fmt = rng.choice(_NUMBER_FORMATS)
    number_markers = rng.random() < 1 / 3
    where: dict[str, int] = {}
    for n, line in enumerate(before.split("\n"), 1):
        where.setdefault(line, n)
    out, last = [], 0
    for line in sketch.split("\n"):
        is_code = classify(line.strip())[0] == LineKind.CODE
        if not is_code and not number_markers:
            out.append(line)
            continue
        n = where.get(line, 0) if is_code else 0
        last = n if n > last else last + 1
        out.append(fmt.format(n=last, line=line).rstrip() if not line.strip()
                   else fmt.format(n=last, line=line))
    return "\n".join(out)


EDIT_FORMATS = ("search_replace", "unified_diff", "apply_patch")


def edit_answer(before: str, after: str, fmt: str, rng: random.Random, path: str,
                language: str) -> tuple[str, str]:
    """The change from ``before`` to ``after`` written as a model writes it in an edit
    format other than a lazy sketch, and its label (``unique`` when every block's lines to
    find occur once in ``before``, else ``ambiguous``):

    * ``search_replace``: aider's blocks (the file's path above a fence) or Cline's
      (``------- SEARCH`` / ``+++++++ REPLACE``), 0-3 lines of context (at least one line to
      find), one block in eight with its indentation taken off (the model dedented it);
    * ``unified_diff``: 0-3 lines of context, ``--- a/`` headers half the time, the hunks'
      line numbers right, off by a few lines or written ``@@ ... @@`` (a third each), blank
      context lines without their space one answer in three, fenced as ``diff`` half the
      time;
    * ``apply_patch``: OpenAI's envelope, 1-3 lines of context, the enclosing definition's
      header as a ``@@`` scope line half the time."""
    (a, _), (b, _) = _split(before), _split(after)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    context = rng.choice((0, 1, 2, 2, 3, 3)) if fmt != "apply_patch" else rng.choice((1, 2, 3, 3))
    groups = list(matcher.get_grouped_opcodes(context))
    blocks = []  # (a0, a1, find, put)
    for group in groups:
        a0, a1 = group[0][1], group[-1][2]
        b0, b1 = group[0][3], group[-1][4]
        if a0 == a1 and a0 > 0:  # nothing to find: take the line above as context
            a0, b0 = a0 - 1, b0 - 1
        blocks.append((a0, a1, a[a0:a1], b[b0:b1]))
    label = "unique" if all(_occurs_once(a, find) for _, _, find, _ in blocks) else "ambiguous"
    if fmt == "search_replace":
        cline = rng.random() < 0.25
        parts = []
        for _, _, find, put in blocks:
            if rng.random() < 1 / 8:
                find, put = _dedented(find, put)
            opener, closer = ("------- SEARCH", "+++++++ REPLACE") if cline else (
                "<<<<<<< SEARCH", ">>>>>>> REPLACE")
            parts.append("\n".join([opener, *find, "=======", *put, closer]))
        if cline:
            return "\n\n".join(parts) + "\n", label
        tag = _FENCE_TAGS.get(language, "")
        return "".join(f"{path}\n```{tag}\n{part}\n```\n\n" for part in parts), label
    if fmt == "unified_diff":  # its hunks as written: one that only adds has nothing to find
        # lines with their ends, so that a last line gaining or losing its newline is a change
        # ("\ No newline at end of file", as git writes it)
        a, b = _terminated(before), _terminated(after)
        groups = list(difflib.SequenceMatcher(None, a, b, autojunk=False)
                      .get_grouped_opcodes(context))
        label = "unique" if all(_occurs_once(a, a[g[0][1]:g[-1][2]]) for g in groups) \
            else "ambiguous"
        lines = [f"--- a/{path}", f"+++ b/{path}"] if rng.random() < 0.5 else []
        numbers = rng.choice(("right", "off", "none"))
        bare_blank = rng.random() < 1 / 3

        def written(prefix: str, line: str) -> list[str]:
            text = "" if bare_blank and prefix == " " and line == "\n" else \
                prefix + line.removesuffix("\n")
            return [text] if line.endswith("\n") else [text, "\\ No newline at end of file"]

        for group in groups:
            a0, a1, b0, b1 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            if numbers == "none":
                lines.append("@@ ... @@")
            else:
                shift = rng.choice((-1, 1)) * rng.randint(1, 12) if numbers == "off" else 0
                start = max(a0 + 1 + shift, 1) if a1 > a0 else a0
                lines.append(f"@@ -{start},{a1 - a0} +{max(b0 + 1 + shift, 1)},{b1 - b0} @@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    lines += [out for line in a[i1:i2] for out in written(" ", line)]
                    continue
                lines += [out for line in a[i1:i2] for out in written("-", line)]
                lines += [out for line in b[j1:j2] for out in written("+", line)]
        text = "\n".join(lines) + "\n"
        if rng.random() < 0.5:
            text = "Here is the diff:\n\n```diff\n" + text + "```\n"
        return text, label
    if fmt == "apply_patch":
        lines = ["*** Begin Patch", f"*** Update File: {path}"]
        for group in groups:
            a0 = group[0][1]
            scope = _enclosing_header(a, a0, language) if rng.random() < 0.5 else None
            lines.append(f"@@ {scope.strip()}" if scope else "@@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    lines += [" " + line for line in a[i1:i2]]
                    continue
                lines += ["-" + line for line in a[i1:i2]]
                lines += ["+" + line for line in b[j1:j2]]
        lines.append("*** End Patch")
        return "\n".join(lines) + "\n", label
    raise ValueError(f"unknown edit format {fmt!r}; known: {', '.join(EDIT_FORMATS)}")


def _terminated(text: str) -> list[str]:
    """``text``'s lines, each with its newline (the last one without, where it has none)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _occurs_once(lines: list[str], find: list[str]) -> bool:
    if not find:
        return False
    size = len(find)
    return sum(lines[k:k + size] == find for k in range(len(lines) - size + 1)) == 1


def _dedented(find: list[str], put: list[str]) -> tuple[list[str], list[str]]:
    """Both sides with the lines to find's common indentation taken off (where the new
    lines have it too)."""
    lead = [line[:_indent(line)] for line in find if line.strip()]
    common = min(lead, key=len) if lead else ""
    if not common or not all(x.startswith(common) for x in lead) or not all(
            line.startswith(common) for line in put if line.strip()):
        return find, put
    cut = len(common)
    return ([line[cut:] for line in find], [line[cut:] for line in put])


def _enclosing_header(lines: list[str], at: int, language: str) -> str | None:
    """The nearest definition header above line ``at`` that encloses it (less indented)."""
    width = None
    for k in range(min(at, len(lines) - 1), -1, -1):
        line = lines[k]
        if not line.strip():
            continue
        if width is None:
            width = _indent(line)
            continue
        if _indent(line) < width and _def_name(line, language):
            return line
        width = min(width, _indent(line))
    return None


_BETWEEN_FENCES = ("Then:", "And further down:", "Next, update this part:", "Finally:")


def split_answer(sketch: str, language: str, rng: random.Random) -> str:
    """``sketch`` as a chat answer that shows the change in two fences, split at a marker
    line with code on both sides (the marker ends the first block and opens the second),
    prose before and between them, and a shell block between them half the time; a sketch
    with no such marker comes back in one fence."""
    from specialists.apply.markers import LineKind, classify

    lines = sketch.removesuffix("\n").split("\n")  # its own blank lines at the end kept
    code = [classify(line.strip())[0] == LineKind.CODE and bool(line.strip()) for line in lines]
    inner = [i for i, line in enumerate(lines)
             if line.strip() and not code[i] and any(code[:i]) and any(code[i + 1:])]
    tag = _FENCE_TAGS.get(language, "")
    if not inner:
        return f"{rng.choice(_BEFORE_FENCE)}\n\n```{tag}\n" + "\n".join(lines) + "\n```\n"
    cut = rng.choice(inner)
    first, second = lines[:cut + 1], lines[cut:]
    text = f"{rng.choice(_BEFORE_FENCE)}\n\n```{tag}\n" + "\n".join(first) + "\n```\n\n"
    if rng.random() < 0.5:
        text += "Run the tests after:\n\n```bash\nmake test\n```\n\n"
    text += f"{rng.choice(_BETWEEN_FENCES)}\n\n```{tag}\n" + "\n".join(second) + "\n```\n"
    return text
