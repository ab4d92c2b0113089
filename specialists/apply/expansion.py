"""Marker expansion: the merged lines between two anchors of the piecewise reading.

A marker keeps the original span it stands for (checking what it says it keeps and where
it starts), a ``remove`` comment deletes its span, the sketch's new lines are written in
the file's style, and a changed definition header next to a marker replaces the old one's.
Where several separators share one gap, each group between them is placed by ``floating``.
Matched lines keep the original's bytes where the sketch agrees with them (``emit_matched``).
A sketch edge with no marker keeps what lies beyond it unless the sketch plainly writes the
file's start or end there; where it may do either it abstains (``_edge_deletes``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from specialists.apply.deletions import delete, locate_remove
from specialists.apply.floating import locate_group
from specialists.apply.languages import definition_name
from specialists.apply.markers import LineKind
from specialists.apply.result import Abstain
from specialists.apply.sketch_lines import IMPLICIT
from specialists.apply.text import reindent

if TYPE_CHECKING:
    from specialists.apply.reading import Reading

__all__ = ["emit_gap", "emit_matched", "file_head"]

_MAX_HEADER = 6  # lines a definition's signature may take


def emit_gap(merger: Reading, ja: int, pa: int, jb: int, pb: int, out: list[str], origin: list[int],
             dry: bool = False) -> None:
    """Write what lies strictly between anchors (ja, pa) and (jb, pb): with no separator
    there, the sketch's lines replace the original's; with one, the marker keeps its span
    or the ``remove`` comment deletes it; with several, each group between them is placed
    (``floating``). ``dry``: only the text, no counts (to compare two placements)."""
    sk = merger.sk
    items = range(ja + 1, jb)
    seps = [j for j in items if sk.kinds[j] != LineKind.CODE]
    if not seps:
        new = list(items)
        if (merger.keep_short_blanks and all(not sk.keys[j] for j in new) and pb > pa + 1
                and all(not merger.ok[p] for p in range(pa + 1, pb))
                and ja not in merger.literal_lines
                and not _header_closed_up(merger, pa, pb)):
            _keep(merger, pa + 1, pb, out, origin)  # blank lines the sketch dropped or merged
            if not dry:
                merger.blank_guesses += 1
                merger.guessed_at.append(ja)
            return
        _replace_run(merger, pa + 1, pb, new, out, origin, dry)
        return
    first, last = seps[0], seps[-1]
    lo, hi = pa + 1, pb
    pre = _trim_blanks(merger, list(range(ja + 1, first)), True, lo, hi)
    post = _trim_blanks(merger, list(range(last + 1, jb)), False, lo, hi)
    # A changed definition header next to a marker replaces the header of the same name.
    old_header = _replaced_header(merger, post, lo, hi)
    if old_header is not None:
        delete(merger, old_header, hi, by_remove=False, dry=dry)
        hi = old_header
    head: list[int] = []
    if pre and lo < hi and _same_definition(merger, pre[0], lo):
        head = [lo]
        lo += 1
    _emit_new(merger, pre, out, origin)
    if head:
        delete(merger, head[0], head[0] + 1, by_remove=False, dry=dry)
    if len(seps) == 1:
        if sk.kinds[seps[0]] == LineKind.MARKER:
            cut = _unfinished_definition(merger, seps[0], lo, hi)
            if cut > lo:
                delete(merger, lo, cut, by_remove=False, dry=dry)
                lo = cut
        # the marker stands between two pinned lines (each found once in the original and
        # once in the sketch) or a file edge, nothing new beside it: it keeps exactly the
        # lines between them, whatever its indentation
        bracketed = (lo == pa + 1 and hi == pb and not any(sk.keys[j] for j in pre + post)
                     and (ja < 0 or _pinned(merger, ja))
                     and (jb >= merger.m or _pinned(merger, jb)))
        _emit_single_sep(merger, seps[0], pre, post, lo, hi, out, origin, dry, bracketed)
    else:
        _emit_floating(merger, seps, lo, hi, out, origin, dry)
    _emit_new(merger, post, out, origin)


def _header_closed_up(merger: Reading, pa: int, pb: int) -> bool:
    """Original line pa opens a definition (``def f():``, ``class C {``) and pb, after only
    blank lines, is the first line of its body, which the sketch writes right under the
    header: the blank lines there are what formatters delete (black, prettier), so the
    sketch means it rather than a dropped blank line. On the development sample this
    closed-up header was the commit's own edit in 10 sketches and a dropped line in 1."""
    ok = merger.ok
    return (pa >= 0 and pb < merger.n and ok[pa].endswith((":", "{", "("))
            and merger.owidth[pb] > merger.owidth[pa]
            and definition_name(ok[pa], merger.language) is not None)


def _replace_run(merger: Reading, lo: int, hi: int, new: list[int], out: list[str],
                 origin: list[int], dry: bool) -> None:
    """Original lines lo..hi give way to the sketch lines ``new``. A blank run at either
    end that the sketch wrote shorter keeps its original length: sketch writers drop a
    blank line (aider sees the same), they do not mean to delete it."""
    ok, keys = merger.ok, merger.sk.keys
    lead_o = 0
    while lo + lead_o < hi and not ok[lo + lead_o]:
        lead_o += 1
    lead_s = 0
    while lead_s < len(new) and not keys[new[lead_s]]:
        lead_s += 1
    if merger.keep_short_blanks and lo + lead_o == hi and lead_s < len(new):
        new = _glued_insertion(merger, lo, hi, new, lead_s, out, origin, dry)
        if new is None:
            return
    if merger.keep_short_blanks and lead_o > lead_s and lo + lead_o < hi and lead_s < len(new):
        _keep(merger, lo, lo + lead_o, out, origin)
        merger.blank_guesses += not dry
        lo, new = lo + lead_o, new[lead_s:]
    tail_o = 0
    while hi - tail_o - 1 >= lo and not ok[hi - tail_o - 1]:
        tail_o += 1
    tail_s = 0
    while tail_s < len(new) and not keys[new[len(new) - 1 - tail_s]]:
        tail_s += 1
    keep_tail = (merger.keep_short_blanks and tail_o > tail_s and hi - tail_o > lo
                 and tail_s < len(new))
    if keep_tail:
        new = new[:len(new) - tail_s]
        hi -= tail_o
        merger.blank_guesses += not dry
    delete(merger, lo, hi, by_remove=False, dry=dry)
    _emit_new(merger, new, out, origin)
    if keep_tail:
        _keep(merger, hi, hi + tail_o, out, origin)


def _glued_insertion(merger: Reading, lo: int, hi: int, new: list[int], lead_s: int,
                     out: list[str], origin: list[int], dry: bool) -> list[int] | None:
    """New code written into a run of blank lines only (original lines lo..hi), glued to
    the line above it (below it) and followed (preceded) by a shorter blank run: the
    insertion goes at that edge and the blank run beyond it is the original's, which
    the sketch wrote shorter (a dropped blank line, as ``_replace_run`` reads one at a
    run's edge). Writes it all and returns ``None``; otherwise returns ``new`` as given."""
    keys = merger.sk.keys
    tail_s = 0
    while not keys[new[len(new) - 1 - tail_s]]:
        tail_s += 1
    blanks = hi - lo
    if lead_s == 0 and 0 < tail_s < blanks:
        _emit_new(merger, new[:len(new) - tail_s], out, origin)
        _keep(merger, lo, hi, out, origin)
    elif tail_s == 0 and 0 < lead_s < blanks:
        _keep(merger, lo, hi, out, origin)
        _emit_new(merger, new[lead_s:], out, origin)
    else:
        return new
    merger.blank_guesses += not dry
    return None


def _trim_blanks(merger: Reading, js: list[int], before_sep: bool, lo: int, hi: int) -> list[int]:
    """Unmatched blank lines next to a marker that the kept span starts (ends) with too:
    they stand for the same blank lines, which the span keeps."""
    ok = merger.ok
    if before_sep:
        p = lo
        while js and not merger.sk.keys[js[-1]] and p < hi and not ok[p]:
            js.pop()
            p += 1
    else:
        p = hi - 1
        while js and not merger.sk.keys[js[0]] and p >= lo and not ok[p]:
            js.pop(0)
            p -= 1
    return js


def _emit_single_sep(merger: Reading, sep: int, pre: list[int], post: list[int], lo: int, hi: int,
                     out: list[str], origin: list[int], dry: bool,
                     bracketed: bool = False) -> None:
    """One separator between the block's new edge lines: a ``remove`` comment deletes
    lo..hi (which must be what it names), a marker keeps it, and an implicit marker keeps
    it or lets the sketch's first (last) lines replace the file's."""
    sk = merger.sk
    kind = sk.kinds[sep]
    if kind == LineKind.REMOVE:
        info = sk.infos[sep]
        if (info is not None and (info.remove_quotes or info.remove_name) and lo < hi
                and sep not in merger.dp_spans):
            target = locate_remove(merger, info, lo, hi, sep, required=False)
            if target is None:
                raise Abstain("the remove comment names code that is not where it stands",
                              sk.span(sep, sep))
            beside = sum(1 for p in range(lo, hi)
                         if merger.ok[p] and not target[0] <= p < target[1])
            if beside:  # e.g. a sketch that ends with a remove comment, its last marker lost
                raise Abstain(f"the sketch would delete {beside} lines beside what its remove "
                              f"comment names", sk.span(sep, sep))
        delete(merger, lo, hi, by_remove=True, dry=dry)
        return
    if kind == IMPLICIT:
        # No marker before the first (after the last) block: either the sketch forgot it
        # (keep the lines), or its first new lines replace the file's first lines.
        new = [sk.keys[j] for j in (post if sep == 0 else pre) if sk.keys[j]]
        rest = [merger.ok[p] for p in range(lo, hi) if merger.ok[p]]
        if not new and rest and _edge_moved(merger, sep):
            # The sketch's first (last) line is the original's, moved to another depth (into
            # a new block): new code at the sketch's edge, as below.
            raise Abstain(f"the sketch {'starts' if sep == 0 else 'ends'} with a line moved "
                          f"to another indentation and no marker: it does not say whether "
                          f"the {len(rest)} lines {'before' if sep == 0 else 'after'} it stay",
                          sk.span(sep, sep))
        if not new and rest and _edge_deletes(merger, sep, lo, hi, rest):
            delete(merger, lo, hi, by_remove=False, dry=dry)
            return
        other_defs = [key for key in rest if definition_name(key, merger.language) is not None
                      and key not in new]
        if lo < hi and (not rest or (new and not other_defs and hi - lo <= 2 * len(new) + 2)):
            # Only blank lines beyond the sketch's first (last) line, or a few lines its
            # new lines replace: it writes the file's start (end). Nobody leaves out a
            # marker that stands for blank lines only. A definition there that the sketch
            # does not repeat may be what a left-out marker stood for: abstain.
            delete(merger, lo, hi, by_remove=False, dry=dry)
            return
        if new and other_defs and hi - lo <= 2 * len(new) + 2:
            raise Abstain(f"the sketch {'starts' if sep == 0 else 'ends'} with new code and "
                          f"no marker: it does not say whether the {len(rest)} lines "
                          f"{'before' if sep == 0 else 'after'} it stay",
                          sk.span(sep, sep))
        if new and rest:
            # New code at the sketch's edge, no marker, and more code beyond it: the
            # sketch writes the file's start (end), deleting that code, or inserts its new
            # lines and lost its marker. On the development sample the two were equally
            # common, and keeping was never right where the sketch has no marker at all.
            raise Abstain(f"the sketch {'starts' if sep == 0 else 'ends'} with new code and "
                          f"no marker: it does not say whether the {len(rest)} lines "
                          f"{'before' if sep == 0 else 'after'} it stay", sk.span(sep, sep))
    _check_keep(merger, sep, lo, hi)
    if kind == LineKind.MARKER and not bracketed:
        _check_marker_indent(merger, sep, lo, hi)
    _keep(merger, lo, hi, out, origin)


# Lines that make up a file's head: imports, a package clause, a shebang, comments, a
# module docstring's quotes, "use strict", and the parts of a parenthesised import list.
_HEAD = re.compile(
    r"""^(?:import\b|from\s+\S+\s+import\b|package\s|\#|//|/\*|\*|(?:[rbuRBU]?(?:\"\"\"|'\'\'))"""
    r"""|['"]use\sstrict['"]|(?:const|let|var)\s+[\w${}\s,]+=\s*require\(|use\s|extern\s+crate\b)""")
# What a sketch's edge with no marker does to the original lines beyond it, in the shapes
# ``_edge_deletes`` names (imports above a sketch that opens with imports; definitions below
# a sketch that ends a top-level block): "delete" (the sketch starts/ends the file, frontier
# models' convention), "keep" (the sketch forgot its marker) or "abstain". Both readings are
# common (BENCHMARKS.md, applier round 5): deleting cost the house-style sketches more silent
# wrong answers than it saved the frontier-style ones, so the applier abstains.
EDGE_MODE = {"lead": "abstain", "tail": "abstain"}
HEAD_UNSAID = ("the sketch starts with no marker below import lines it does not show: it does "
               "not say whether they stay")


def file_head(keys: list[str]) -> bool:
    """Whether ``keys`` (an original's first lines) are a file's head only and open with
    its docstring or a comment: the docstring, then imports, comments and blank lines."""
    if not keys or not keys[0].startswith(('"""', "'''", "#", "//", "/*")):
        return False
    at = 0
    quote = keys[0][:3] if keys[0][:3] in ('"""', "'''") else ""
    if quote:
        at = next((i + 1 for i, key in enumerate(keys) if quote in key[3 if i == 0 else 0:]), 0)
        if not at:
            return False
    return _head_lines([key for key in keys[at:] if key])


def _head_lines(keys: list[str]) -> bool:
    """Whether every line is part of a file's head (imports and comments)."""
    depth = 0
    for key in keys:
        if depth > 0 or _HEAD.match(key):
            if _HEAD.match(key) or depth > 0:
                depth += key.count("(") - key.count(")")
            continue
        if re.fullmatch(r'"[\w./@-]+"', key) or key in (")", "("):
            continue  # a Go import block's lines
        return False
    return True


# A module's exports (``exports.Option = Option;``, ``module.exports = ...``, ``export
# {...}``) close a file as its definitions do: a sketch ending above them with no marker has
# ended the file (the frontier style, which drops them) or forgotten its marker (the house
# style, which keeps them), and does not say which.
_EXPORTS = re.compile(r"(?:module\.)?exports\b|export\s")


def _edge_deletes(merger: Reading, sep: int, lo: int, hi: int, rest: list[str]) -> bool:
    """Whether original lines lo..hi, before the sketch's first (after its last) line and no
    marker there, are deleted: the sketch starts (ends) the file. Frontier models leave
    out the first marker when their sketch starts the file, so a sketch that opens with the
    file's imports while the file has a few more import lines above them has rewritten the
    import block. Where the sketch may only have forgotten its marker, the lines stay."""
    sk = merger.sk
    code = [j for j in range(len(sk.keys)) if sk.kinds[j] == LineKind.CODE and sk.keys[j]]
    if not code or not any(kind in (LineKind.MARKER, LineKind.REMOVE) for kind in sk.kinds):
        return False  # no marker at all: a snippet of the definitions it shows
    if sep == 0:
        if merger.head_deletes:
            return True
        if EDGE_MODE["lead"] == "keep" or merger.head_keeps:
            return False
        first = sk.keys[code[0]]
        if len(rest) <= 12 and _head_lines(rest) and _head_lines([first]):
            if EDGE_MODE["lead"] == "abstain":
                raise Abstain(HEAD_UNSAID, sk.span(sep, sep))
            return True
        return False
    if merger.tail_deletes:
        return True
    if EDGE_MODE["tail"] == "keep":
        return False
    last = code[-1]
    p = merger.sm[last]
    if p < 0 or merger.owidth[lo + next(i for i in range(hi - lo) if merger.ok[lo + i])] > 0:
        return False
    first_rest = next(q for q in range(lo, hi) if merger.ok[q])
    starts_def = (definition_name(merger.ok[first_rest], merger.language) is not None
                  or merger.ok[first_rest].startswith("@")
                  or _EXPORTS.match(merger.ok[first_rest]) is not None)
    if not starts_def:
        return False
    if EDGE_MODE["tail"] == "abstain":
        raise Abstain("the sketch ends with no marker above definitions it does not show: it "
                      "does not say whether they stay", sk.span(sep, sep))
    return True


def _edge_moved(merger: Reading, sep: int) -> bool:
    """The sketch's first code line (``sep`` 0) or its last is matched to an original line
    at another indentation: written where the sketch moved it, so it is new code there."""
    sk = merger.sk
    code = (j for j in (range(len(sk.keys)) if sep == 0 else range(len(sk.keys) - 1, -1, -1))
            if sk.kinds[j] == LineKind.CODE and sk.keys[j])
    edge = next(code, None)
    if edge is None or merger.sm[edge] < 0:
        return False
    return sk.widths[edge] - merger.shift != merger.owidth[merger.sm[edge]]


def _pinned(merger: Reading, j: int) -> bool:
    """Sketch line j is found once in the original and once in the sketch, and matched
    there at the original's indentation (a line moved deeper is new code's, not context)."""
    key, p = merger.sk.keys[j], merger.sm[j]
    return (bool(key) and p >= 0 and len(merger.pos.get(key, ())) == 1
            and merger.scount.get(key) == 1
            and merger.sk.widths[j] - merger.shift == merger.owidth[p])


def _check_keep(merger: Reading, sep: int, lo: int, hi: int) -> None:
    """A marker that names what it keeps (``... keep foo ...``) must keep a line naming it."""
    info = merger.sk.infos[sep]
    if info is None or not info.keep_name:
        return
    name = info.keep_name.split(".")[-1]
    pattern = re.compile(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])")
    if not any(pattern.search(merger.ok[p]) for p in range(lo, hi)):
        raise Abstain(f"the marker keeps {info.keep_name!r} but the span it stands for "
                      f"does not contain it", merger.sk.span(sep, sep))


def _check_marker_indent(merger: Reading, sep: int, lo: int, hi: int) -> None:
    """A marker stands for lines that start at its own indentation (that is where a
    sketch writer puts it). Kept lines that open deeper than the marker are the rest of
    the statement before it, which the sketch may have rewritten: abstain."""
    width = merger.sk.widths[sep] - merger.shift
    p = lo
    while p < hi and not merger.ok[p]:
        p += 1
    if p < hi and merger.owidth[p] > width:
        raise Abstain("the marker's indentation does not match the code it would keep",
                      merger.sk.span(sep, sep))


def _emit_floating(merger: Reading, seps: list[int], lo: int, hi: int, out: list[str],
                   origin: list[int], dry: bool) -> None:
    """Several separators between two anchors: place each group between the markers.

    A group is a run of remove comments and code lines with no marker inside. One right
    after the left anchor (or right before the right one) is attached to it; one between
    two markers floats and is placed by what it names or by similarity.
    """
    sk = merger.sk
    groups: list[tuple[int, int]] = []  # inclusive sketch ranges
    j = seps[0]
    while j <= seps[-1]:
        if sk.kinds[j] in (LineKind.MARKER, IMPLICIT):
            j += 1
            continue
        start = j
        while j <= seps[-1] and sk.kinds[j] not in (LineKind.MARKER, IMPLICIT):
            j += 1
        if any(sk.kinds[i] == LineKind.REMOVE or sk.keys[i] for i in range(start, j)):
            groups.append((start, j - 1))
    cursor = lo
    marker_before = False
    for g0, g1 in groups:
        attached_left = g0 == seps[0]
        attached_right = g1 == seps[-1]
        marker_before = any(sk.kinds[i] in (LineKind.MARKER, IMPLICIT) for i in range(seps[0], g0))
        t0, t1 = locate_group(merger, g0, g1, cursor, hi)
        if attached_right:
            t1 = hi
        if cursor < t0:
            if attached_left or not marker_before:
                delete(merger, cursor, t0, by_remove=False, dry=dry)
            else:
                _check_keep_range(merger, seps[0], g0, cursor, t0)
                _keep(merger, cursor, t0, out, origin)
        has_remove = any(sk.kinds[i] == LineKind.REMOVE for i in range(g0, g1 + 1))
        delete(merger, t0, t1, by_remove=has_remove, dry=dry)
        code = [i for i in range(g0, g1 + 1) if sk.kinds[i] == LineKind.CODE]
        _emit_new(merger, code, out, origin)
        cursor = t1
    if cursor < hi:
        _keep(merger, cursor, hi, out, origin)


def _check_keep_range(merger: Reading, first: int, upto: int, lo: int, hi: int) -> None:
    """``_check_keep`` for every marker of first..upto, over the span lo..hi they keep."""
    for i in range(first, upto):
        if merger.sk.kinds[i] == LineKind.MARKER:
            _check_keep(merger, i, lo, hi)


def _replaced_header(merger: Reading, post: list[int], lo: int, hi: int) -> int | None:
    """Where the original's header lines start that the block's new header replaces: the
    block's new lines end with a definition's signature (one line, or several ending in
    ``:`` / ``{``), and the lines right before its matched body are the original's
    signature of that definition (its first line names it, none is blank)."""
    if not post or hi - 1 < lo:
        return None
    sk, ok = merger.sk, merger.ok
    for i in range(len(post) - 1, max(len(post) - _MAX_HEADER, 0) - 1, -1):
        j = post[i]
        if not sk.keys[j] or merger.sm[j] >= 0:
            return None
        if definition_name(sk.keys[j], merger.language) is None:
            continue
        if i < len(post) - 1 and not sk.keys[post[-1]].endswith((":", "{")):
            return None
        for q in range(hi - 1, max(lo, hi - _MAX_HEADER) - 1, -1):
            if not ok[q]:
                return None
            if _same_definition(merger, j, q):
                return q if q == hi - 1 or ok[hi - 1].endswith((":", "{")) else None
        return None
    return None


def _same_definition(merger: Reading, j: int, p: int) -> bool:
    """Unmatched sketch line j opens the definition original line p opens (by name)."""
    if merger.sm[j] >= 0 or not merger.sk.keys[j] or not merger.ok[p]:
        return False
    new = definition_name(merger.sk.keys[j], merger.language)
    return new is not None and new == definition_name(merger.ok[p], merger.language)


def _unfinished_definition(merger: Reading, sep: int, lo: int, hi: int) -> int:
    """End of a definition the block before ``sep`` opened but a marker outside it closes.

    ``def bar():`` / ``return 10`` / ``# ... existing code ...`` at the header's level: the
    marker cannot stand for the rest of ``bar``'s old body, so the new body replaces it.
    """
    sk = merger.sk
    j = sep - 1
    while j >= 0 and sk.kinds[j] == LineKind.CODE:
        if (sk.keys[j] and sk.widths[j] <= sk.widths[sep]
                and (merger.sm[j] < 0 or definition_name(sk.keys[j], merger.language) is None)):
            return lo  # a line at the marker's level after the header: not inside one
        if (merger.sm[j] >= 0 and sk.widths[j] >= sk.widths[sep]
                and definition_name(sk.keys[j], merger.language) is not None):
            if all(merger.sm[x] == merger.sm[j] + x - j for x in range(j + 1, sep)
                   if sk.keys[x]):
                # the header and the lines after it as they were, or no body line before
                # the marker: the marker stands for the rest of the body (a definition
                # needs one; nobody shows a kept prefix of a body to delete the rest),
                # written at the wrong indentation
                return lo
            end = merger.definition_end(merger.sm[j], merger.n)
            if not lo < end <= hi:
                return lo
            level = sk.widths[sep] - merger.shift
            if any(merger.ok[p] and merger.owidth[p] <= level for p in range(lo, end - 1)):
                return lo  # the old body has lines at the marker's level (a Go template
                # string at column 0): the marker may well stand inside it
            shown = sum(1 for x in range(j + 1, sep) if sk.keys[x])
            cut = sum(1 for p in range(lo, end) if merger.ok[p])
            if cut > shown + 2:
                # the sketch shows a few lines of a body and the cut would delete many more:
                # a body rewritten in full is about as long as the old one; more likely the
                # marker stands for the rest of the body at the wrong indentation
                return lo
            return end
        j -= 1
    return lo


def emit_matched(merger: Reading, j: int, p: int, out: list[str], origin: list[int]) -> None:
    """A sketch line matched to original line p: the original's bytes where they agree.

    The original keeps its indentation characters and line ending; the sketch decides the
    rest (its trailing whitespace too), and a deliberate re-indent (code moved into a
    block) takes the sketch's indentation, converted to the original's style.
    """
    sraw, oraw = merger.sk.raw[j].rstrip("\r"), merger.o.raw[p]
    cr = "\r" if oraw.endswith("\r") else ""
    obody = oraw[: len(oraw) - len(cr)]
    if not merger.ok[p]:  # blank on both sides: the sketch's whitespace, unless shifted
        line = "" if merger.shift else sraw
    elif merger.sk.widths[j] - merger.shift == merger.owidth[p]:
        # Same width: the original's indentation characters, unless the sketch writes
        # this line in the file's own style and the original line did not (a fix).
        body = sraw.lstrip(" \t")
        # The sketch's own bytes when it writes in the file's style and unshifted: a
        # spaces-to-tabs fix is an edit; a sketch in another style mangled them.
        if merger.faithful:
            indent = sraw[: len(sraw) - len(body)]
        else:
            indent = obody[: len(obody) - len(obody.lstrip(" \t"))]
        line = indent + body
    else:
        out.append(_new_line(merger, j))
        origin.append(-1)
        return
    if line == obody or (len(line) > len(obody) and line.rstrip() == obody.rstrip()
                         and line.startswith(obody)):
        # the same line, or the sketch only added trailing whitespace (a writer's slip:
        # a deliberate edit of trailing whitespace removes it)
        out.append(oraw)
        origin.append(p)
    else:
        out.append(line + cr)
        origin.append(-1)


def _emit_new(merger: Reading, js: Iterable[int], out: list[str], origin: list[int]) -> None:
    """The sketch's code lines js: matched ones as ``emit_matched`` writes them, the rest new."""
    for j in js:
        if merger.sk.kinds[j] != LineKind.CODE:
            continue
        if merger.sm[j] >= 0:
            emit_matched(merger, j, merger.sm[j], out, origin)
        else:
            out.append(_new_line(merger, j))
            origin.append(-1)


def _new_line(merger: Reading, j: int) -> str:
    """A new sketch line, in the file's indentation style and line ending."""
    line = merger.sk.raw[j]
    if not merger.faithful:
        line = reindent(line, merger.sk.widths[j] - merger.shift, _indent_char_near(merger, j))
    return line + "\r" if merger.o.crlf else line


def _indent_char_near(merger: Reading, j: int) -> str:
    """The indentation character of the nearest indented original line the sketch's
    block matched around line j (a Go file's template strings may be indented with
    spaces while its code uses tabs); the file's commonest otherwise."""
    for step in (-1, 1):
        i = j + step
        while 0 <= i < merger.m and merger.sk.kinds[i] == LineKind.CODE:
            p = merger.sm[i]
            if p >= 0 and merger.owidth[p] > 0:
                return merger.o.raw[p][0]
            i += step
    return merger.o.indent_char


def _keep(merger: Reading, lo: int, hi: int, out: list[str], origin: list[int]) -> None:
    """Original lines lo..hi stay as they are."""
    out.extend(merger.o.raw[lo:hi])
    origin.extend(range(lo, hi))
