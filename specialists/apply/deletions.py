"""Reading what a sketch deletes: ``remove`` comments (the quoted lines or the definition
they name, where they stand or anywhere for the global reading) and deletion by context
(original lines between two consecutive sketch lines, deleted only when both lines are
certainly placed). Also the deletion counts the result reports."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from specialists.apply.languages import (BRACE_LANGUAGES, bracket_net, bracket_steps,
                                         closing_line, comment_syntax, definition_name,
                                         definition_start)
from specialists.apply.markers import LineKind, MarkerInfo
from specialists.apply.result import Abstain, ReadAgain
from specialists.apply.similarity import rewrites, similarities

if TYPE_CHECKING:
    from specialists.apply.reading import Reading

__all__ = ["check_implicit_deletion", "definitions_named", "delete", "locate_remove",
           "remove_candidates", "whole_definitions"]

_BIG_DELETION = 10  # non-blank lines: a deletion this large needs two pinned lines a side
_LIKE = 0.4  # a new line this alike the original line it stands for rewrites it
_MOST_REWRITTEN = 3  # lines rewritten one for one beside a line not pinned
_LEAD = re.compile(r"[\w$.]+")  # a line's first word: a key, a name, a keyword


def delete(merger: Reading, lo: int, hi: int, by_remove: bool, dry: bool = False,
           count: bool = True) -> None:
    """Original lines lo..hi are dropped: count their non-blank lines as deleted by a
    ``remove`` comment or by context (not on a ``dry`` run, which only compares text)."""
    if dry or not count or hi <= lo:
        return
    nonblank = sum(map(bool, map(merger.ok.__getitem__, range(lo, hi))))
    if by_remove:
        merger.deleted_by_remove += nonblank
    else:
        merger.deleted_by_context += nonblank


def remove_candidates(merger: Reading, info: MarkerInfo) -> list[tuple[int, int]]:
    """Every original run a remove comment may delete: its quoted first..last lines or
    the definition it names, with ``_separating_blanks``."""
    ok, n = merger.ok, merger.n
    runs: list[tuple[int, int]] = []
    if info.remove_quotes:
        first = info.remove_quotes[0].strip()
        last = info.remove_quotes[-1].strip()
        starts = _quoted(merger, first, 0, n)
        for p in starts:
            if len(info.remove_quotes) == 1:
                runs.append((p, p + 1))
                continue
            runs += [(p, q + 1) for q in range(p, n) if ok[q] == last]
    elif info.remove_name:
        runs = definitions_named(merger, info.remove_name.split(".")[-1].rstrip("()"), 0, n)
    return sorted({_separating_blanks(merger, t0, t1) for t0, t1 in runs})


def _separating_blanks(merger: Reading, t0: int, t1: int) -> tuple[int, int]:
    """A removed run takes the blank lines after it when a blank line (or the file's
    start) precedes it, and the blank lines before it at the end of the file, so the
    blank separation around it stays as it was. The piecewise reading's rule
    (``_with_separating_blanks``) differs on purpose: where the two disagree the
    cross-check abstains, and sharing one rule made both wrong together at k = 0
    (BENCHMARKS.md, applier round 3)."""
    ok, n = merger.ok, merger.n
    if t1 >= n:
        while t0 > 0 and not ok[t0 - 1]:
            t0 -= 1
    elif t0 == 0 or not ok[t0 - 1]:
        while t1 < n and not ok[t1]:
            t1 += 1
    return t0, t1


def locate_remove(merger: Reading, info: MarkerInfo, lo: int, hi: int, j: int,
                  required: bool) -> tuple[int, int] | None:
    """The original run in lo..hi that remove comment ``j`` names (its quoted first..last
    lines, or the definition it names), or ``None`` when not ``required`` and not found."""
    span = merger.sk.span(j, j)
    if info.remove_quotes:
        first = _unique_line(merger, info.remove_quotes[0], lo, hi, span, required)
        if first is None:
            return None
        if len(info.remove_quotes) == 1:
            return (first, first + 1)
        last_key = info.remove_quotes[-1].strip()
        ends = [p for p in range(first, hi) if merger.ok[p] == last_key]
        if len(ends) > 1:  # "remove `a` … `b`" with two b's after a: which one?
            raise Abstain("the remove comment's last line occurs more than once after its "
                          "first", span)
        if ends:
            if _alone(merger, j):
                return _joined_blanks(merger, first, ends[0] + 1, lo, hi)
            return (first, ends[0] + 1)
        if required:
            raise Abstain("the remove comment's last line is not in the original", span)
        return None
    if info.remove_name:
        found = definitions_named(merger, info.remove_name.split(".")[-1].rstrip("()"), lo, hi)
        if len(found) == 1:
            return _with_separating_blanks(merger, *found[0], lo, hi)
        if required or len(found) > 1:
            why = "no definition" if not found else "more than one definition"
            raise Abstain(f"remove comment: {why} named {info.remove_name!r} there", span)
        return None
    if required:
        raise Abstain("the remove comment does not say what to remove", span)
    return None


def _alone(merger: Reading, j: int) -> bool:
    """Remove comment j stands between two separators (markers, remove comments or the
    sketch's edges): no new code beside it that the blank lines around it may set apart."""
    kinds = merger.sk.kinds
    return all(i < 0 or i >= merger.m or kinds[i] != LineKind.CODE for i in (j - 1, j + 1))


def _joined_blanks(merger: Reading, t0: int, t1: int, lo: int, hi: int) -> tuple[int, int]:
    """Quoted lines t0..t1 to remove, with a blank run on either side (the one below with
    code after it before ``hi``): deleted alone, they would join the two runs into one as
    long as both. The writer removed a block and one of the blank runs that set it apart;
    the longer run stays (the lines removed take the shorter one after them). Only for a
    remove comment with no new code beside it (``_alone``): new code takes the removed
    lines' place, and the blank lines around it stay."""
    ok = merger.ok
    above = 0
    while t0 - above - 1 >= lo and not ok[t0 - above - 1]:
        above += 1
    below = 0
    while t1 + below < hi and not ok[t1 + below]:
        below += 1
    if above and below and t1 + below < hi:
        return t0, t1 + min(above, below)
    return t0, t1


def _with_separating_blanks(merger: Reading, t0: int, t1: int, lo: int, hi: int) -> tuple[int, int]:
    """A removed definition takes the blank lines after it with it (before it at the end
    of the file), so the blank lines between the definitions left stay as they were."""
    end = t1
    while end < hi and not merger.ok[end]:
        end += 1
    if end > t1 or t1 < merger.n:
        return t0, end
    while t0 - 1 >= lo and not merger.ok[t0 - 1]:
        t0 -= 1
    return t0, t1


def _quoted(merger: Reading, key: str, lo: int, hi: int) -> list[int]:
    """Original lines in lo..hi equal to a remove comment's quoted line, or, when none
    is, those that contain it (a quote may be cut short)."""
    return [p for p in range(lo, hi) if merger.ok[p] == key] or [
        p for p in range(lo, hi) if key and key in merger.ok[p]]


def _unique_line(merger: Reading, quote: str, lo: int, hi: int, span: tuple[int, int],
                 required: bool) -> int | None:
    hits = _quoted(merger, quote.strip(), lo, hi)
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise Abstain(f"the remove comment's line {quote!r} occurs more than once there", span)
    if required:
        raise Abstain(f"the remove comment's line {quote!r} is not in the original", span)
    return None


def definitions_named(merger: Reading, name: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """(start, end) of each definition in lo..hi with this name, decorators included."""
    out = []
    for p in range(lo, hi):
        key = merger.ok[p]
        if name in key:
            found = definition_name(key, merger.language)
            if found and found[1] == name:
                start = definition_start(merger.ok, merger.owidth, p, lo)
                out.append((start, merger.definition_end(p, hi)))
    return out


def check_implicit_deletion(merger: Reading, ja: int, pa: int, jb: int, pb: int) -> None:
    """Original lines deleted between two consecutive sketch lines (no marker between):
    certain only when both lines are pinned by a run holding a line found once in the
    original and once in the sketch, or when the sketch's new lines there rewrite them.
    Otherwise the two lines may be a copy placed on the wrong lines, and the deletion is
    the silent loss of code the issue warns about (issue 4)."""
    if (not merger.check_deletions or ja < 0 or jb >= merger.m or pb <= pa + 1
            or merger.sk.sep_between(ja, jb)):
        return
    gone = [p for p in range(pa + 1, pb) if merger.ok[p]]
    if not gone:
        return
    need = 1 if len(gone) <= _BIG_DELETION else 2
    # A line is certain where a run of matches through it holds a line found once in the
    # original and once in the sketch. A line that only closes brackets (``}``, ``});``) repeats all through a
    # brace-language file and is rarely pinned by itself; it is placed as certainly as the
    # line it balances, or, just below a certain line, as the end of the block that line is
    # in.
    up = _anchored_run(merger, ja, pa, -1, need) or _bracket_pinned(merger, ja, pa)
    down = _anchored_run(merger, jb, pb, 1, need) or _bracket_pinned(merger, jb, pb) or (
        up and _same_block(merger, ja, pa, jb, pb))
    if up and down:
        return
    if up != down and len(gone) <= _BIG_DELETION and _statements_beside_closer(
            merger, ja, pa, jb, pb, jb if up else ja):
        return
    if need == 1 and _anchored_run(merger, jb, pb, 1) and _only_place_above(merger, ja, pb):
        return
    above, below = _pinned_stretch(merger, ja, -1), _pinned_stretch(merger, jb, 1)
    if above and below and above + below >= need + 1:
        return
    new = [merger.sk.keys[j] for j in range(ja + 1, jb) if merger.sk.keys[j]]
    # The lower line also fits at or before the upper one's place (or the reverse): the
    # sketch reads as well as a pure insertion there, with nothing deleted.
    avoidable = (merger.sk.keys[jb] in merger.ok[pa:pb]
                 or merger.sk.keys[ja] in merger.ok[pa + 1:pb + 1])
    if _closed_up_definitions(merger, ja, jb, pb):
        return
    if not avoidable and (_rewrites_body(merger, ja, pa, pb)
                          or rewrites(new, [merger.ok[p] for p in gone])):
        return
    if up != down and _lines_rewritten(merger, ja, jb, gone):
        return
    if down and not up and _comment_rewritten(merger, ja, jb, gone):
        return
    if up != down and _one_line_dropped(merger, ja, jb, gone):
        return
    raise ReadAgain(UNCERTAIN_DELETION, merger.sk.span(ja, jb), (pa + 1, pb))


def _lines_rewritten(merger: Reading, ja: int, jb: int, gone: list[int]) -> bool:
    """Up to ``_MOST_REWRITTEN`` original lines deleted and as many new lines in their
    place, each at its old line's indentation (after the sketch's shift), opening and
    closing the same brackets, and like it (similarity at least ``_LIKE``): the sketch
    rewrote those lines. Read as an insertion, with the old lines kept beside the new ones,
    the file would hold two runs of one shape where the sketch shows one. Only where one of
    the two lines around is pinned (the caller's ``up != down``): the other, placed next to
    the rewritten lines, is not a copy further off, or the deletion would hold more.

    For more than one line, the first new line also starts with the old one's first word
    (a key, a name, a keyword): a new entry added to a list of like entries (``NAME:
    createError(`` and two lines like its neighbour's) lines up with the next entry line
    by line, and only its name tells the two apart."""
    if not 1 <= len(gone) <= _MOST_REWRITTEN:
        return False
    sk = merger.sk
    new = [j for j in range(ja + 1, jb) if sk.keys[j]]
    if len(new) != len(gone):
        return False
    if len(gone) > 1:
        first, old = _LEAD.match(sk.keys[new[0]]), _LEAD.match(merger.ok[gone[0]])
        if first is None or old is None or first.group() != old.group():
            return False
    return all(sk.widths[j] - merger.shift == merger.owidth[p]
               and bracket_steps(sk.keys[j]) == bracket_steps(merger.ok[p])
               and bool(similarities(sk.keys[j], merger.ok, p, p + 1, _LIKE))
               for j, p in zip(new, gone))


def _one_line_dropped(merger: Reading, ja: int, jb: int, gone: list[int]) -> bool:
    """One original line deleted, a whole statement (it opens and closes no bracket), and
    nothing written in its place, beside a pinned line (the caller's ``up != down``): the
    sketch dropped that line (an import, a keyword argument, an entry). The line not pinned
    stands right next to it, so placed on a copy further off the deletion would hold more
    than one line. A line that only closes brackets is left out: ``}`` repeats, and which
    one goes the sketch does not say."""
    if len(gone) != 1 or any(merger.sk.keys[j] for j in range(ja + 1, jb)):
        return False
    key = merger.ok[gone[0]]
    return bracket_steps(key) == (0, 0) and not _CLOSER.match(key)


def _comment_line(key: str, language: str | None) -> bool:
    """Whether a stripped line is a comment: the language's line comment, or in a language
    with ``//`` comments also a block comment's line (``/*``, ``*``, ``*/``)."""
    prefix = comment_syntax(language).prefix
    if prefix != "//":
        return key.startswith(prefix)
    return key.startswith(("//", "/*", "*")) or key.endswith("*/")


def _comment_rewritten(merger: Reading, ja: int, jb: int, gone: list[int]) -> bool:
    """Every original line deleted is a comment, the sketch writes a comment in their place,
    and the line below is pinned (the caller's ``down and not up``): the comment over that
    line was rewritten. Placed on a copy of the upper line further up, the deletion would
    hold code too. Not where only the upper line is pinned: a comment that opens the code
    below is that code's, and the code may be placed elsewhere."""
    language = merger.language
    if not gone or not all(_comment_line(merger.ok[p], language) for p in gone):
        return False
    return any(_comment_line(merger.sk.keys[j], language) for j in range(ja + 1, jb)
               if merger.sk.keys[j])


UNCERTAIN_DELETION = ("the sketch deletes original lines between two lines that are not "
                      "certainly placed")


_CLOSER = re.compile(r"[)\]}][)\]};,]*$")
_BRACKET_REACH = 400  # original lines walked to find the line balancing a bracket


def _bracket_pinned(merger: Reading, j: int, p: int) -> bool:
    """In a brace language, sketch line j (placed at p) only closes brackets, the line of
    its stretch (above it, no marker between) that opens the last of them is placed where a
    line found once in the original and once in the sketch pins it, and in the original
    the line balancing that one is p: j is the line closing that block, not a copy of it
    further on."""
    if merger.language not in BRACE_LANGUAGES or p < 0 or not _CLOSER.match(merger.sk.keys[j]):
        return False
    sk = merger.sk
    top = j - 1
    while top >= 0 and sk.kinds[top] == LineKind.CODE:
        top -= 1
    i = closing_line(sk.keys, j - 1, top, -1) if top < j - 1 else None
    q = merger.sm[i] if i is not None else -1
    if q < 0 or q >= p or p - q > _BRACKET_REACH:
        return False
    return ((_anchored_run(merger, i, q, -1) or _anchored_run(merger, i, q, 1))
            and closing_line(merger.ok, q + 1, p + 1, 1) == p)


def _statements_beside_closer(merger: Reading, ja: int, pa: int, jb: int, pb: int,
                              closer: int) -> bool:
    """In a brace language, the line not certainly placed (``closer``) only closes brackets,
    every original line deleted between the two opens and closes none (whole statements,
    no block begun or ended), and the sketch's new lines there balance as they do. Placed
    on any other line like it, the closer would delete a block's edge or leave the file's
    brackets unbalanced; here the sketch rewrites plain statements next to a block's end."""
    if merger.language not in BRACE_LANGUAGES or not _CLOSER.match(merger.sk.keys[closer]):
        return False
    if any(bracket_steps(merger.ok[p]) != (0, 0) for p in range(pa + 1, pb)):
        return False
    return bracket_net(merger.sk.keys, ja + 1, jb) == 0


def _same_block(merger: Reading, j: int, p: int, k: int, q: int) -> bool:
    """In a brace language, sketch line k (placed at q, below the certainly placed line j
    at p) only closes brackets and is the first below j to close the block j stands in,
    and in the original q is that line for p: k is where that block ends."""
    return (merger.language in BRACE_LANGUAGES and 0 < q - p <= _BRACKET_REACH
            and bool(_CLOSER.match(merger.sk.keys[k]))
            and closing_line(merger.sk.keys, j + 1, k + 1, 1) == k
            and closing_line(merger.ok, p + 1, q + 1, 1) == q)


def _only_place_above(merger: Reading, ja: int, pb: int) -> bool:
    """The sketch's last line with text above a pinned line pb (blank lines between) can go
    in one place only: its text occurs once between the last certainly placed line above
    it and pb. A marker may stand for any number of lines, so that is every place the
    sketch allows; with one, the lines between it and pb are certainly deleted."""
    sk = merger.sk
    upper = ja
    while upper >= 0 and sk.kinds[upper] == LineKind.CODE and not sk.keys[upper]:
        upper -= 1
    if upper < 0 or sk.kinds[upper] != LineKind.CODE or merger.sm[upper] < 0:
        return False
    floor = -1
    for j in range(upper - 1, -1, -1):
        if merger.sm[j] >= 0 and sk.keys[j] and _unique(merger, sk.keys[j]):
            floor = merger.sm[j]
            break
    key = sk.keys[upper]
    places = [p for p in merger.pos.get(key, ()) if floor < p < pb]
    return places == [merger.sm[upper]]


def _closed_up_definitions(merger: Reading, ja: int, jb: int, pb: int) -> bool:
    """The sketch shows two definitions' neighbours closed up: the lines it leaves out
    between them are whole definitions (decorators, header, body), the line after them is
    pinned by a line found once in the original and once in the sketch and opens the next
    definition at the same depth (or ends the enclosing block), and no new line stands
    between. That is how a writer shows a deleted definition (Morph's and Relace's prompts
    ask for exactly this), and the structure leaves no other reading."""
    sk, ok = merger.sk, merger.ok
    if any(sk.keys[j] for j in range(ja + 1, jb)) or not _anchored_run(merger, jb, pb, 1):
        return False
    upper = ja  # the sketch's last line with text above, blank lines between
    while upper >= 0 and sk.kinds[upper] == LineKind.CODE and not sk.keys[upper]:
        upper -= 1
    if upper < 0 or sk.kinds[upper] != LineKind.CODE or merger.sm[upper] < 0:
        return False
    pa = merger.sm[upper]
    if any(merger.sm[j] >= 0 and not pa < merger.sm[j] <= pb for j in range(upper + 1, jb)):
        return False
    # the upper line (or the lower one) found again among the lines left out: the sketch
    # may mean that place, which deletes less (nothing, for a pure insertion)
    if sk.keys[upper] in ok[pa + 1:pb] or sk.keys[jb] in ok[pa + 1:pb]:
        return False
    return whole_definitions(merger, pa + 1, pb)


def whole_definitions(merger: Reading, lo: int, pb: int) -> bool:
    """The original's lines with text in lo..pb are whole definitions (decorators, header,
    body) at one depth, and line pb opens the next one at that depth (or ends the
    enclosing block): what a sketch that shows the lines around them closed up deletes."""
    ok, width = merger.ok, merger.owidth
    p, end = lo, pb
    while p < end and not ok[p]:
        p += 1
    while end > p and not ok[end - 1]:
        end -= 1
    if p >= end or pb >= merger.n:
        return False
    level = width[p]
    lower = ok[pb]
    if width[pb] > level or (width[pb] == level and not lower.startswith("@")
                             and definition_name(lower, merger.language) is None):
        return False
    while p < end:
        if not ok[p]:
            p += 1
            continue
        if width[p] != level:
            return False
        header = p
        while header < end and ok[header].startswith("@") and width[header] == level:
            header += 1
        if header >= end or definition_name(ok[header], merger.language) is None:
            return False
        p = merger.definition_end(header, end)
        if p <= header:
            return False
    return True


def _rewrites_body(merger: Reading, ja: int, pa: int, pb: int) -> bool:
    """The deletion runs from inside a pinned definition to its end: the sketch wrote
    that definition's new body in full (a full definition replaces the old one)."""
    sk = merger.sk
    j, p = ja, pa
    while j >= 0 and sk.kinds[j] == LineKind.CODE and merger.sm[j] == p:
        key = sk.keys[j]
        if key and definition_name(key, merger.language) is not None:
            if not _unique(merger, key):
                return False
            end = merger.definition_end(p, merger.n)
            return end - 1 <= pb <= end + 1
        j -= 1
        p -= 1
    return False


def _unique(merger: Reading, key: str) -> bool:
    """A line found once in the original and once in the sketch: it pins its match."""
    return len(merger.pos.get(key, ())) == 1 and merger.scount.get(key) == 1


def _pinned_stretch(merger: Reading, j: int, step: int) -> int:
    """How many of the sketch's code lines from j on, walking by ``step`` up to the next
    marker (or the sketch's edge), are placed where they occur once in the original and
    once in the sketch (at most 2). Such lines around a deletion with no marker between
    them bound a stretch the sketch writes in full: every original line between their
    places is one of its lines or deleted, whichever lines in between match which."""
    sk = merger.sk
    found = 0
    while 0 <= j < merger.m and sk.kinds[j] == LineKind.CODE and found < 2:
        if merger.sm[j] >= 0 and sk.keys[j] and _unique(merger, sk.keys[j]):
            found += 1
        j += step
    return found


def _anchored_run(merger: Reading, j: int, p: int, step: int, need: int = 1) -> bool:
    """Whether the diagonal run of matches through (j, p), walking by ``step``, holds a line
    that occurs once in the original and once in the sketch."""
    sk = merger.sk
    while 0 <= j < merger.m and sk.kinds[j] == LineKind.CODE and merger.sm[j] == p:
        if sk.keys[j] and _unique(merger, sk.keys[j]):
            need -= 1
            if need <= 0:
                return True
        j += step
        p += step
    return False
