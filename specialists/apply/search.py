"""The reading search (issue 36): every reading of a sketch the merger can already make, each
checked, with what the scorer needs to know about it.

The rules (``merge`` and the checks in ``applier``) give one answer or abstain. The search
enumerates the other readings the same machinery allows and writes, for each distinct file
they give, features of the *readings* (never of the commit): which readings give it, how
many distinct files the sketch reads to, whether the rules gave it or why they abstained,
which checks it fails, how much of it the sketch pins down (anchors, fuzzy placements,
blank-line guesses, lines deleted by context). ``scorer`` turns them into a calibrated
probability of being the intended file.

Readings: the piecewise reading as ``merge`` starts it (``anchor`` then ``assemble``); the
same with a sketch's shorter blank runs read literally (``keep_short_blanks`` off, and every
block literal); with no first marker read as starting the file (``head_deletes``), with no
last marker as ending it (``tail_deletes``); the global alignment's earliest and latest
optimal readings (``align``). Each is kept only when it changes the file.

Where the rules answered, their answer is the one candidate, but the other readings are
still run to count the clean files they give that differ from it (``Search.alternatives``):
a sketch that reads to two clean files does not say which one its writer meant.

Imports run one way: sketch → alignment (``merger``, ``align``) → this search → ``scorer``
→ ``applier``; nothing here imports ``scorer`` or ``applier``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from specialists.apply import align as _align
from specialists.apply import checks
from specialists.apply.anchoring import faithful_indentation
from specialists.apply.languages import definition_name
from specialists.apply.markers import LineKind
from specialists.apply.merge import _sketch_ends_file
from specialists.apply.merger import Merger
from specialists.apply.result import Abstain, ApplyOptions
from specialists.apply.sketch_lines import IMPLICIT, SketchLines
from specialists.apply.text import Lines, sketch_text, split_lines

__all__ = ["READINGS", "REASONS", "Candidate", "FEATURES", "Search", "features", "normalised", "search",
           "sketch_features"]

READINGS = ("piecewise", "blank_literal", "all_literal", "head", "tail", "dp_early", "dp_late",
            "dp_cheap_delete", "dp_dear_delete")
# The global reading again under costs moved a little: a file that changes with them was a
# near tie (``merge_checks.check_near_ties`` asks the same of the piecewise reading).
_PERTURBED = (("dp_cheap_delete", _align.Costs(delete=25, delete_open=12)),
              ("dp_dear_delete", _align.Costs(delete=60, delete_open=30)))
# The rules' abstain reasons, by family (the first whose words the reason holds).
REASONS = (
    ("ambiguous", ("ambiguous",)),
    ("two_readings", ("two readings",)),
    ("edge", ("edge line", "anchored only", "repeat")),
    ("parse", ("parse", "does not parse", "syntax")),
    ("deletion", ("delete", "removes", "remove comment")),
    ("unplaced", ("cannot be placed", "not found", "no anchor", "cannot be read", "not in the")),
    ("nothing", ("changes nothing",)),
)
_CHECKS = ("placeholders", "local_duplicates", "split_imports", "redefinitions", "deletions",
           "parse")


@dataclass
class Candidate:
    """One distinct file the sketch reads to, and what the scorer reads of it."""

    text: str
    readings: list[str] = field(default_factory=list)
    rules: bool = False  # the rules' own answer
    failed: list[str] = field(default_factory=list)  # the checks it fails
    fuzzy: int = 0
    blank_guesses: int = 0
    deleted_by_context: int = 0
    deleted_by_remove: int = 0
    matched: float = 0.0  # share of the sketch's code lines placed on an original line
    faithful: bool = True
    searched: bool = False
    blank_only: bool = False  # differs from another candidate in blank lines only
    deleted: int = 0  # original lines with text the file no longer has
    inserted: int = 0  # lines with text the file adds
    inserted_known: int = 0  # of those, lines the original has too (context read as new)
    deleted_definitions: int = 0  # definition headers among the deleted lines
    features: list[float] = field(default_factory=list)
    score: float = 0.0
    lines: list[str] = field(default_factory=list)  # merged raw lines (a searched reading's)
    origin: list[int] = field(default_factory=list)  # original index of each, -1: new
    final_newline: bool = True


@dataclass
class Search:
    """The candidates of one sketch, and the sketch's own features."""

    candidates: list[Candidate]
    sketch: list[float]
    rules_applied: bool
    rules_reason: str | None
    sketch_new: int = 0  # the sketch's code lines with text that the original does not have
    piecewise_failed: bool = False  # the piecewise reading itself abstained
    dp_split: bool = False  # the global reading's earliest and latest optima give two files
    dp_cost: float = -1.0  # the global reading's optimal cost per sketch line (-1: none)
    # Where the rules answered: the other files the readings give that pass every check and
    # differ from the rules' answer beyond whitespace (a sketch that reads two clean ways),
    # and whether no reading gives the rules' answer at all.
    alternatives: int = 0
    rules_unread: bool = False


def reason_family(reason: str | None) -> str | None:
    if reason is None:
        return None
    low = reason.lower()
    for name, words in REASONS:
        if any(word in low for word in words):
            return name
    return "other"


def sketch_features(olines: Lines, sk: SketchLines) -> list[float]:
    """What the sketch alone says about how well it can be placed: its blocks' edge lines
    (the lines next to a marker) found once, more than once or never in the original; its
    code lines found in the original; its markers; a first or last marker left out; comment
    lines that are neither in the original nor read as markers (a note, an unknown marker)."""
    counts: dict[str, int] = {}
    for key in olines.keys:
        if key:
            counts[key] = counts.get(key, 0) + 1
    kinds, keys, m = sk.kinds, sk.keys, len(sk.keys)
    edges: list[str] = []
    for j in range(m):
        if kinds[j] != LineKind.CODE or not keys[j]:
            continue
        prev = next((i for i in range(j - 1, -1, -1) if keys[i] or kinds[i] != LineKind.CODE), -1)
        nxt = next((i for i in range(j + 1, m) if keys[i] or kinds[i] != LineKind.CODE), m)
        if (prev >= 0 and kinds[prev] != LineKind.CODE) or (nxt < m and kinds[nxt] != LineKind.CODE):
            edges.append(keys[j])
    code = [k for j, k in enumerate(keys) if kinds[j] == LineKind.CODE and k]
    n_edges = max(len(edges), 1)
    n_code = max(len(code), 1)
    markers = sum(1 for kind in kinds if kind == LineKind.MARKER)
    removes = sum(1 for kind in kinds if kind == LineKind.REMOVE)
    notes = sum(1 for k in code if k.startswith(("#", "//", "/*")) and k not in counts)
    return [
        sum(1 for e in edges if counts.get(e) == 1) / n_edges,
        sum(1 for e in edges if counts.get(e, 0) > 1) / n_edges,
        sum(1 for e in edges if e not in counts) / n_edges,
        sum(1 for k in code if k in counts) / n_code,
        math.log1p(markers),
        math.log1p(removes),
        float(bool(kinds) and kinds[0] == IMPLICIT),
        float(bool(kinds) and kinds[-1] == IMPLICIT),
        float(notes > 0),
        math.log1p(len(code)),
        math.log1p(len(olines.keys)),
    ]


SKETCH_FEATURES = ("edge_unique", "edge_repeated", "edge_new", "code_in_original",
                   "log_markers", "log_removes", "no_first_marker", "no_last_marker",
                   "unknown_comment", "log_code_lines", "log_original_lines")
CANDIDATE_FEATURES = (
    ("rules",) + tuple(f"by_{r}" for r in READINGS)
    + ("agree_share", "log_candidates", "blank_only", "any_check_failed")
    + tuple(f"failed_{c}" for c in _CHECKS)
    + ("fuzzy", "blank_guesses", "log_deleted_by_context", "deleted_by_remove", "matched",
       "unfaithful", "searched", "log_deleted", "log_inserted", "inserted_over_new",
       "inserted_under_new", "piecewise_failed", "dp_split", "log_inserted_known",
       "deleted_definitions", "log_dp_cost", "no_dp", "log_alternatives", "rules_unread")
    + tuple(f"reason_{name}" for name, _ in REASONS) + ("reason_other",)
)
# Stage A: the rules applied (one candidate, no search); stage B: they abstained.
FEATURES = (("bias_a",) + tuple(f"a_{f}" for f in SKETCH_FEATURES + CANDIDATE_FEATURES)
            + ("bias_b",) + tuple(f"b_{f}" for f in SKETCH_FEATURES + CANDIDATE_FEATURES))


def features(cand: Candidate, found: Search, n_readings: int) -> list[float]:
    """The candidate's feature vector (``FEATURES``): the stage's block filled, the other's
    zero."""
    family = reason_family(found.rules_reason)
    row = [float(cand.rules)] + [float(r in cand.readings) for r in READINGS]
    row += [len(cand.readings) / max(n_readings, 1), math.log(len(found.candidates)),
            float(cand.blank_only), float(bool(cand.failed))]
    row += [float(c in cand.failed) for c in _CHECKS]
    row += [float(cand.fuzzy > 0), float(cand.blank_guesses > 0),
            math.log1p(cand.deleted_by_context), float(cand.deleted_by_remove > 0), cand.matched,
            float(not cand.faithful), float(cand.searched), math.log1p(cand.deleted),
            math.log1p(cand.inserted), math.log1p(max(cand.inserted - found.sketch_new, 0)),
            math.log1p(max(found.sketch_new - cand.inserted, 0)), float(found.piecewise_failed),
            float(found.dp_split), math.log1p(cand.inserted_known),
            float(cand.deleted_definitions > 0), math.log1p(max(found.dp_cost, 0.0)),
            float(found.dp_cost < 0), math.log1p(found.alternatives), float(found.rules_unread)]
    row += [float(family == name) for name, _ in REASONS] + [float(family == "other")]
    block = [1.0] + found.sketch + row
    zeros = [0.0] * len(block)
    return block + zeros if found.rules_applied else zeros + block


def _final_newline(merger: Merger, olines: Lines, slines: Lines, origin: list[int]) -> bool:
    return slines.final_newline if _sketch_ends_file(merger, origin) else olines.final_newline


def _file_checks(merger: Merger, out: list[str], origin: list[int], language: str | None,
                 options: ApplyOptions, parse: bool) -> list[str]:
    failed = []
    runs: list[tuple[str, Callable[[], None]]] = [
        ("placeholders", lambda: checks.check_placeholders(out, origin)),
        ("local_duplicates", lambda: checks.check_local_duplicates(out, origin)),
        ("split_imports", lambda: checks.check_split_imports(out, origin)),
        ("redefinitions", lambda: checks.check_redefinitions(out, origin, language)),
        ("deletions", lambda: checks.check_deletions(merger.deleted_by_context, merger.ok,
                                                     options)),
    ]
    if parse and options.parse_check:
        runs.append(("parse", lambda: checks.check_parse(merger.o.raw, out, origin, language)))
    for name, run in runs:
        try:
            run()
        except Abstain:
            failed.append(name)
    return failed


def _dp(merger: Merger, costs: _align.Costs | None = None, names: tuple[str, str] = (
        "dp_early", "dp_late")) -> tuple[list[tuple[str, Merger, list[str], list[int]]], float]:
    """The global alignment's earliest and latest optimal readings (``Merger.merge_dp``
    without its abstain: both are candidates), and its optimal cost per sketch line
    (-1 when it has no reading)."""
    sk = merger.sk
    other = merger.fork()
    if len(sk.keys) * (len(other.ok) + 1) > _align.MAX_CELLS:
        return [], -1.0
    try:
        early, late = other.global_alignments(costs)
    except Abstain:
        return [], -1.0
    out = []
    pairs_of = ((names[0], early), (names[1], late)) if late is not early else ((names[0], early),)
    for name, al in pairs_of:
        reading = other.fork()
        reading.shift = other.shift
        reading.check_deletions = False
        reading.sm = list(al.sm)
        reading.dp_spans = al.spans
        reading.faithful = faithful_indentation(reading)
        try:
            lines, origin = reading.assemble(reading.fixed())
        except Abstain:
            continue
        out.append((name, reading, lines, origin))
    return out, early.cost / max(len(sk.keys), 1)


def search(original: str, sketch: str, language: str | None, options: ApplyOptions,
           rules_text: str | None, rules_reason: str | None,
           rules_stats: dict[str, int] | None = None) -> Search:
    """Every reading of ``sketch`` against ``original`` (the rules' answer ``rules_text`` or
    their abstain ``rules_reason`` given), one ``Candidate`` per distinct file, features
    not yet written (``features``). With the rules' answer given it is the one candidate
    (the rules already cross-checked it against the global reading); the other readings are
    run only to count the clean files they give that differ from it beyond whitespace
    (``Search.alternatives``): a sketch that reads two clean ways is one whose lines do not
    say which, and the rules' answer to it is the one most often wrong."""
    olines = split_lines(original)
    slines = split_lines(sketch_text(sketch, original)[0])
    sk = SketchLines(slines, set(olines.keys), language)
    found = Search([], sketch_features(olines, sk), rules_text is not None, rules_reason)
    okeys = set(olines.keys)
    found.sketch_new = sum(1 for j, k in enumerate(sk.keys)
                           if k and sk.kinds[j] == LineKind.CODE and k not in okeys)
    if rules_text is not None:
        st = rules_stats or {}
        rules = Candidate(
            rules_text, ["rules"], rules=True, fuzzy=st.get("fuzzy_placements", 0),
            blank_guesses=st.get("blank_guesses", 0),
            deleted_by_context=st.get("deleted_by_context", 0),
            deleted_by_remove=st.get("deleted_by_remove", 0), matched=1.0)
        # every other reading, for one question: does the sketch read to another clean file?
        # (their reading facts go on a scratch record: the rules' answer is not one of them)
        scratch = Search([], found.sketch, True, rules_reason)
        others = _candidates(scratch, olines, slines, sk, language, options)
        want = normalised(rules_text)
        found.alternatives = sum(1 for c in others
                                 if not c.failed and normalised(c.text) != want)
        found.rules_unread = all(c.text != rules_text for c in others)
        found.candidates = [rules]
        return found
    found.candidates = _candidates(found, olines, slines, sk, language, options)
    texts = {c.text: [line for line in c.text.split("\n") if line.strip()]
             for c in found.candidates}
    for cand in found.candidates:
        cand.blank_only = any(texts[o.text] == texts[cand.text] for o in found.candidates
                              if o is not cand)
    return found


def normalised(text: str) -> list[str]:
    """``text`` up to whitespace: its non-blank lines, each with runs of blanks made one space
    and none at the ends (what "the same file up to whitespace" compares)."""
    return [" ".join(line.split()) for line in text.split("\n") if line.strip()]


def _candidates(found: Search, olines: Lines, slines: Lines, sk: SketchLines,
                language: str | None, options: ApplyOptions) -> list[Candidate]:
    """Every reading the merger can make, one ``Candidate`` per distinct file that changes
    the original (``found``'s reading facts — piecewise failed, the global reading's split
    and cost — written on the way)."""
    if not any(k for j, k in enumerate(sk.keys) if sk.kinds[j] == LineKind.CODE):
        return []
    readings: list[tuple[str, Merger, list[str], list[int]]] = []
    base = Merger(olines, sk, language, options)
    try:
        fixed = base.anchor()
        lines, origin = base.assemble(fixed)
        readings.append(("piecewise", base, lines, origin))
    except Abstain:
        found.piecewise_failed = True
    variants: list[tuple[str, dict[str, object]]] = [
        ("blank_literal", {"keep_short_blanks": False}),
        ("all_literal", {"literal_lines": frozenset(range(len(sk.keys)))}),
    ]
    if sk.kinds and sk.kinds[0] == IMPLICIT:
        variants.append(("head", {"head_deletes": True}))
    if sk.kinds and sk.kinds[-1] == IMPLICIT:
        variants.append(("tail", {"tail_deletes": True}))
    for name, setting in variants:
        other = base.fork()
        for key, value in setting.items():
            setattr(other, key, value)
        try:
            lines, origin = other.assemble(other.anchor())
        except Abstain:
            continue
        readings.append((name, other, lines, origin))
    if options.cross_check:
        dp, found.dp_cost = _dp(base)
        found.dp_split = len(dp) == 2 and dp[0][2] != dp[1][2]
        readings += dp
        if dp:
            for name, costs in _PERTURBED:
                more, _ = _dp(base, costs, (name, name))
                readings += more[:1]
    okeys = set(olines.keys)
    by_text: dict[str, Candidate] = {}
    for name, merger, lines, origin in readings:
        if lines == olines.raw:
            continue  # changes nothing: not what a sketch is sent for
        final_newline = _final_newline(merger, olines, slines, origin)
        text = olines.join(lines, final_newline)
        cand = by_text.get(text)
        if cand is None:
            code = [j for j in range(merger.m) if sk.kinds[j] == LineKind.CODE and sk.keys[j]]
            cand = Candidate(text, fuzzy=merger.fuzzy, blank_guesses=merger.blank_guesses,
                             deleted_by_context=merger.deleted_by_context,
                             deleted_by_remove=merger.deleted_by_remove,
                             matched=sum(1 for j in code if merger.sm[j] >= 0) / max(len(code), 1),
                             faithful=merger.faithful, searched=merger.searched,
                             lines=lines, origin=origin, final_newline=final_newline)
            cand.failed = _file_checks(merger, lines, origin, language, options, parse=True)
            kept = set(origin)
            cand.deleted = sum(1 for i, k in enumerate(olines.keys) if k and i not in kept)
            new = [line.strip() for line, o in zip(lines, origin) if o < 0 and line.strip()]
            cand.inserted = len(new)
            cand.inserted_known = sum(1 for key in new if key in okeys)
            cand.deleted_definitions = sum(
                1 for i, k in enumerate(olines.keys)
                if k and i not in kept and definition_name(k, language) is not None)
            by_text[text] = cand
        cand.readings.append(name)
    return list(by_text.values())
