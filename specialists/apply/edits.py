"""Edit answers in the formats models write besides a lazy sketch.

A model asked for a change does not always answer with a sketch: aider's and Cline's
SEARCH/REPLACE blocks, a unified diff (git's, or a model's own, whose line numbers are
often wrong or left out as ``@@ ... @@``) and OpenAI's ``apply_patch`` envelope (``*** Begin
Patch``, ``@@ def scope`` lines) are as common. Each is read here as a list of ``Block``: the
lines to find and the lines to put in their place. Every format is then placed by the same
rules, stricter than the tools that write them:

* the lines to find are looked for exactly, then without trailing whitespace, then with
  the indentation shifted by one amount for all of them (the new lines shifted alike; a
  tab file answered in spaces too), then without the blank lines either side may lack;
* a block found in more than one place is placed only where its format says which: a
  diff's hunks come in file order, a hunk's line number names one of the places exactly,
  an ``apply_patch`` scope line (``@@ class Foo``) holds only one. Otherwise the answer is
  an abstain that names the block (aider takes the first place: a SEARCH of ``}`` lands in
  the wrong function);
* the merged file passes the sketch's own checks (no placeholder left, the edited regions
  still parse) and comes back with a ``git apply``-clean diff.

A text is read as one of these only where its markers are complete and the original does
not hold them itself (a patch file, a document about these formats).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from specialists.apply import checks
from specialists.apply.diff import opcodes, unified_diff
from specialists.apply.result import Abstain, ApplyOptions, ApplyResult
from specialists.apply.text import (Lines, indent_of, indent_width, names_path, reindent,
                                     split_lines)

__all__ = ["Block", "Edit", "apply_edit", "edit_names", "edit_new_lines", "read_edit",
           "replace_lines"]

# aider's blocks (and its older ORIGINAL/UPDATED spelling), Cline's "------- SEARCH"
_SEARCH = re.compile(r"^(?:<{5,9}|-{5,9}) ?(?:SEARCH|ORIGINAL)\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_REPLACE = re.compile(r"^(?:>{5,9}|\+{5,9}) ?(?:REPLACE|UPDATED)\s*$")
# "@@ -12,7 +12,8 @@ def f():", or a model's "@@ ... @@" / "@@ @@" without numbers
_HUNK = re.compile(r"^@@ (?:-(?P<old>\d+)(?:,(?P<old_n>\d+))? \+\d+(?:,(?P<new_n>\d+))? @@.*"
                   r"|(?:[^@].*)?@@\s*)$")
_V4A_BEGIN = re.compile(r"^\*\*\* (?:Begin Patch|Update File: |Add File: |Delete File: )")
_V4A_FILE = re.compile(r"^\*\*\* (?P<op>Update|Add|Delete) File: (?P<path>.+?)\s*$")
_PATCH_SUFFIXES = (".diff", ".patch", ".rej")


@dataclass
class Block:
    """Lines to find in the original and the lines that take their place."""

    find: list[str]
    put: list[str]
    span: tuple[int, int]  # 1-based, inclusive: the block's lines in the caller's text
    line: int | None = None  # a hunk's stated start in the original (1-based)
    scopes: list[str] = field(default_factory=list)  # apply_patch's "@@ class Foo" lines


@dataclass
class Edit:
    """An edit answer read: its format, its blocks, and what it says of the final newline."""

    format: str  # "search_replace", "unified_diff" or "apply_patch"
    blocks: list[Block]
    ordered: bool  # a diff's hunks come in file order
    final_newline: bool | None = None  # None: the original's
    new_file: bool = False


def read_edit(text: str, original: str, path: str | None = None) -> Edit | None:
    """``text`` read as an edit answer, or ``None`` where it is not one (a lazy sketch).

    Raises ``Abstain`` where it is one but cannot be read: a block left open, a diff of
    other files only, a patch that deletes the file."""
    if path and path.lower().endswith(_PATCH_SUFFIXES):
        return None  # a patch file's own text is what the sketch edits
    blocks = "SEARCH" in text or "ORIGINAL" in text
    if not blocks and "*** " not in text and "@@" not in text:
        return None  # a lazy sketch, the common case: decided without splitting it
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    own = original.split("\n")
    if blocks and any(_SEARCH.match(line) for line in lines) and any(
            _REPLACE.match(line) or _DIVIDER.match(line) for line in lines):
        if any(_SEARCH.match(line.strip()) or _REPLACE.match(line.strip()) for line in own):
            return None
        return _search_replace(lines, path)
    if "*** " in text and any(_V4A_BEGIN.match(line) for line in lines):
        if any(_V4A_BEGIN.match(line) for line in own):
            return None
        return _apply_patch(lines, path)
    if "@@" in text and any(_HUNK.match(line) for line in lines):
        if any(_HUNK.match(line) or line.startswith(("+++ ", "--- a/")) for line in own):
            return None
        return _unified_diff(lines, path)
    return None


def edit_new_lines(text: str, original: str, path: str | None = None) -> str | None:
    """The lines an edit answer puts in the file (its REPLACE, ``+`` and context lines), one
    a line, or ``None`` where ``text`` is a lazy sketch or cannot be read: what a check of
    "lines the merge added that the answer never wrote" compares with."""
    try:
        edit = read_edit(text, original, path)
    except Abstain:
        return None
    if edit is None:
        return None
    return "\n".join(line for block in edit.blocks for line in block.put)


def edit_names(text: str, paths: list[str]) -> list[str]:
    """Those of ``paths`` an edit answer names as files it edits (a diff's ``+++ b/...``
    headers, an apply_patch ``*** Update File:`` line, the path above a SEARCH block): where
    one fenced answer holds the change of several files, which of them it is for."""
    names = []
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    for i, line in enumerate(lines):
        if line.startswith(("+++ ", "--- ")):
            names.append(_diff_name(line[4:]))
        elif m := _V4A_FILE.match(line):
            names.append(m.group("path"))
        elif _SEARCH.match(line) and (target := _block_path(lines, i)) is not None:
            names.append(target)
    return [p for p in paths if any(name != "/dev/null" and _names(name, p) for name in names)]


def _names(line: str, path: str) -> bool:
    """Whether a line of the answer (a diff header's name, the path above a block) names
    the file at ``path``."""
    return names_path(line.strip().strip("`*").removeprefix("a/").removeprefix("b/"), path)


def _looks_like_path(line: str) -> bool:
    s = line.strip().strip("`*")
    return (0 < len(s) <= 200 and not any(c.isspace() for c in s) and "." in s
            and not s.endswith((":", ";", ",", ")", "(", "{", "}")) and "=" not in s
            and not s.startswith(("#", "//", "```")))


# SEARCH/REPLACE -----------------------------------------------------------------------------

def _search_replace(lines: list[str], path: str | None) -> Edit:
    blocks: list[Block] = []
    others: set[str] = set()
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        start = i
        target = _block_path(lines, start)
        divider = next((k for k in range(start + 1, len(lines)) if _DIVIDER.match(lines[k])), None)
        end = None if divider is None else next(
            (k for k in range(divider + 1, len(lines)) if _REPLACE.match(lines[k])), None)
        if divider is None or end is None or any(
                _SEARCH.match(lines[k]) for k in range(start + 1, end)):
            raise Abstain(f"the edit block opened at line {start + 1} is not closed: a SEARCH "
                          "block needs a '=======' line and then a '>>>>>>> REPLACE' line",
                          (start + 1, start + 1))
        i = end + 1
        if path and target is not None and not _names(target, path):
            others.add(target.strip().strip("`*"))
            continue
        blocks.append(Block(lines[start + 1:divider], lines[divider + 1:end], (start + 1, end + 1)))
    if not blocks:
        raise Abstain(f"the edit blocks are for {', '.join(sorted(others))}, not {path}")
    return Edit("search_replace", blocks, ordered=False)


def _block_path(lines: list[str], start: int) -> str | None:
    """The file a SEARCH block names on a line of its own just above it (aider writes it
    above the fence), or None."""
    for k in range(start - 1, max(start - 4, -1), -1):
        line = lines[k].strip()
        if not line or line.startswith("```"):
            continue
        return line if _looks_like_path(line) else None
    return None


# unified diffs ------------------------------------------------------------------------------

def _unified_diff(lines: list[str], path: str | None) -> Edit:
    blocks: list[Block] = []
    files: list[str] = []
    ours = True
    new_file = False
    final_newline: bool | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_name = _diff_name(line[4:])
            name = _diff_name(lines[i + 1][4:])
            if name == "/dev/null" and (path is None or _names(old_name, path)):
                raise Abstain("the diff deletes the file; /v1/apply edits files, it does not "
                              "delete them", (i + 1, i + 2))
            files.append(name)
            ours = path is None or _names(name, path) or _names(old_name, path)
            new_file = ours and old_name == "/dev/null"
            i += 2
            continue
        m = _HUNK.match(line)
        if m is None:
            i += 1
            continue
        body, end, eol = _hunk_body(lines, i + 1, m)
        if ours and body:
            find = [text for kind, text in body if kind != "+"]
            put = [text for kind, text in body if kind != "-"]
            stated = int(m.group("old")) if m.group("old") else None
            if find or put:
                blocks.append(Block(find, put, (i + 1, max(end, i + 1)), line=stated))
            if eol is not None:
                final_newline = eol
        i = max(end, i + 1)
    if len(set(files)) > 1 and path is None:
        raise Abstain(f"the diff edits {len(set(files))} files; send each file with its path")
    if not blocks:
        if files:
            raise Abstain(f"the diff edits {', '.join(dict.fromkeys(files))}, not {path}")
        raise Abstain("the diff has no lines to add or remove")
    return Edit("unified_diff", blocks, ordered=True, final_newline=final_newline,
                new_file=new_file)


def _diff_name(text: str) -> str:
    name = text.split("\t")[0].strip()
    return name if name == "/dev/null" else name.removeprefix("a/").removeprefix("b/")


def _hunk_body(lines: list[str], start: int, header: re.Match[str],
               ) -> tuple[list[tuple[str, str]], int, bool | None]:
    """A hunk's lines as (kind, text) from ``start``, the line after them, and what a
    ``\\ No newline at end of file`` says of the new file's last line (None: nothing)."""
    body: list[tuple[str, str]] = []
    eol: bool | None = None
    k = start
    while k < len(lines):
        line = lines[k]
        if _HUNK.match(line) or line.startswith(("```", "diff --git ", "*** ")) or (
                line.startswith("--- ") and k + 1 < len(lines) and lines[k + 1].startswith("+++ ")):
            break
        if line.startswith("\\"):
            if body:  # after a removed line: the old file lacked it, so the new one has it
                eol = body[-1][0] == "-" and eol is None
            k += 1
            continue
        if line[:1] in ("+", "-", " "):
            body.append((line[0], line[1:]))
        elif not line:
            body.append((" ", ""))  # a blank context line whose space was lost
        else:
            _no_changes_after(lines, k, "the diff's hunk")
            break
        k += 1
    # trailing empty lines: separators, unless the header's counts need them
    want = int(header.group("old_n")) if header.group("old_n") is not None else None
    while body and body[-1] == (" ", "") and (
            want is None or sum(1 for kind, _ in body if kind != "+") > want):
        body.pop()
        k -= 1
    return body, k, eol


def _no_changes_after(lines: list[str], k: int, what: str) -> None:
    """Line ``k`` ends a hunk without being context, ``+`` or ``-``: an abstain where changed
    lines follow before the next hunk (a context line that lost its space; reading on would
    drop them without a word), nothing where prose follows."""
    for line in lines[k + 1:]:
        if _HUNK.match(line) or line.startswith(("```", "diff --git ", "*** ", "@@")):
            return
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- ")):
            raise Abstain(f"{what} has a line that is neither context (' ') nor '+' or '-' "
                          f"before more changed lines: {lines[k].strip()[:60]!r}", (k + 1, k + 1))


# apply_patch (V4A) --------------------------------------------------------------------------

def _apply_patch(lines: list[str], path: str | None) -> Edit:
    blocks: list[Block] = []
    files: list[str] = []
    ours = path is None
    new_file = False
    scopes: list[str] = []
    body: list[tuple[str, str]] = []
    first = 0  # where the block being read starts (its first "@@" line or body line)

    def close(end: int) -> None:
        while body and body[-1] == (" ", ""):
            body.pop()
        if ours and any(kind != " " for kind, _ in body):
            blocks.append(Block([t for kind, t in body if kind != "+"],
                                [t for kind, t in body if kind != "-"], (first + 1, end),
                                scopes=list(scopes)))
        body.clear()

    for i, line in enumerate(lines):
        m = _V4A_FILE.match(line)
        if m or line.startswith(("*** ", "```")):
            close(i)
            scopes = []
            if m:
                files.append(m.group("path"))
                ours = path is None or _names(m.group("path"), path)
                if ours and m.group("op") == "Delete":
                    raise Abstain("the patch deletes the file; /v1/apply edits files, it "
                                  "does not delete them", (i + 1, i + 1))
                new_file = ours and m.group("op") == "Add"
            continue
        if line.startswith("@@"):
            if any(kind != " " for kind, _ in body):
                close(i)
                scopes = []
            if not scopes and not body:
                first = i
            body.clear()  # context before a scope line only leads to it
            if line[2:].strip():
                scopes.append(line[2:].strip())
            continue
        if not body and not scopes:
            first = i
        if line[:1] in ("+", "-", " "):
            body.append((line[0], line[1:]))
        elif not line.strip():
            body.append((" ", ""))
        else:
            _no_changes_after(lines, i, "the patch's hunk")
            close(i)
            scopes = []
    close(len(lines))
    named = list(dict.fromkeys(files))
    if len(named) > 1 and path is None:
        raise Abstain(f"the patch edits {len(named)} files; send each file with its path")
    if not blocks:
        if named:
            raise Abstain(f"the patch edits {', '.join(named)}, not {path}")
        raise Abstain("the patch has no lines to add or remove")
    return Edit("apply_patch", blocks, ordered=True, new_file=new_file)


# placing the blocks -------------------------------------------------------------------------

class _Ambiguous(Abstain):
    """A block found in more than one place, none picked by its format."""

    def __init__(self, reason: str, span: tuple[int, int] | None, count: int) -> None:
        super().__init__(reason, span)
        self.count = count


def replace_lines(text: str, search: str, replace: str) -> tuple[str | None, str | None]:
    """``text`` with the whole lines ``search`` holds put in ``replace``'s place, found by
    the rules every edit format is (exactly, then without trailing whitespace, with one
    indentation shift, without blank lines either side lacks) and only where one place
    fits: (the new text, None) or (None, why). Never a part of a line: a SEARCH of
    ``x = 1`` is not found in ``max = 1``."""
    lines = split_lines(text)
    eol = "\r" if lines.crlf else ""
    find, put = (part.removesuffix("\n").replace("\r\n", "\n").split("\n")
                 for part in (search, replace))
    if not replace:
        put = []
    block = Block(find, put, (1, 1))
    try:
        place = _place(block, 1, [line.removesuffix("\r") for line in lines.raw], lines.keys,
                       lines.indent_char, 0, [])
    except _Ambiguous as exc:
        return None, f"SEARCH text occurs {exc.count} times"
    except Abstain:
        return None, "SEARCH text not found (a SEARCH holds whole lines of the file)"
    raw = lines.raw[:place.lo] + [line + eol for line in place.put] + lines.raw[place.hi:]
    return lines.join(raw), None


@dataclass
class _Place:
    lo: int
    hi: int  # the original's lines [lo, hi) are replaced
    put: list[str]
    level: int  # 0 exact, 1 trailing whitespace, 2 indentation, 3 blank lines
    by_number: bool = False


def apply_edit(original: str, edit: Edit, language: str | None, path: str | None,
               opts: ApplyOptions) -> ApplyResult:
    """The file ``edit`` makes of ``original`` with its diff, or ``Abstain``."""
    lines = split_lines(original)
    eol = "\r" if lines.crlf else ""
    if not original.strip():
        if not (edit.new_file or all(not b.find for b in edit.blocks)):
            raise Abstain("the file is empty and the edit has lines to find in it",
                          edit.blocks[0].span)
        out = [line + eol for b in edit.blocks for line in b.put]
        merged = "\n".join(out) + ("\n" if out and edit.final_newline is not False else "")
        diff = unified_diff([], out, opcodes([-1] * len(out), 0), path or "file", True,
                            edit.final_newline is not False)
        return ApplyResult("applied", merged=merged, diff=diff, path=path, confidence=1.0,
                           stats={"format": edit.format, "blocks": len(edit.blocks)})
    if edit.format == "search_replace" and len(edit.blocks) > 1:
        out, origin, places = _either(edit, lines, eol)
    else:
        out, origin, places = _at_once(edit, lines, eol)
    final_newline = lines.final_newline if edit.final_newline is None else edit.final_newline
    checks.check_placeholders(out, origin)
    if opts.parse_check:
        checks.check_parse(lines.raw, out, origin, language)
    diff = unified_diff(lines.raw, out, opcodes(origin, len(lines.raw)), path or "file",
                        lines.final_newline, final_newline)
    if not diff:
        raise Abstain("the edit changes nothing in the file")
    level = max(p.level for p in places)
    confidence = 0.8 if any(p.by_number for p in places) else (1.0 if level <= 1 else 0.9)
    merged = lines.join(out, final_newline)
    return ApplyResult("applied", merged=merged, diff=diff, path=path, confidence=confidence,
                       stats={"format": edit.format, "blocks": len(edit.blocks),
                              "loose_blocks": sum(p.level >= 2 for p in places),
                              "placed_by_number": sum(p.by_number for p in places),
                              "lines_in": len(lines.raw), "lines_out": len(out)})


def _at_once(edit: Edit, lines: Lines, eol: str) -> tuple[list[str], list[int], list[_Place]]:
    """Every block placed in the original (a diff's hunks all speak of it), none overlapping:
    the new lines, the original line each came from (-1: new), the places."""
    bare = [line.removesuffix("\r") for line in lines.raw]
    places: list[_Place] = []
    after = 0
    for n, block in enumerate(edit.blocks, 1):
        place = _place(block, n, bare, lines.keys, lines.indent_char,
                       after if edit.ordered else 0, places)
        places.append(place)
        after = place.hi
    places.sort(key=lambda p: p.lo)
    for a, b in zip(places, places[1:]):
        if b.lo < a.hi:
            raise Abstain("two edit blocks find the same lines of the file; merge them into one")
    out: list[str] = []
    origin: list[int] = []
    at = 0
    for p in places:
        out.extend(lines.raw[at:p.lo])
        origin.extend(range(at, p.lo))
        new = [line + eol for line in p.put]
        out.extend(new)
        origin.extend(_kept(lines.raw[p.lo:p.hi], new, p.lo))
        at = p.hi
    out.extend(lines.raw[at:])
    origin.extend(range(at, len(lines.raw)))
    return out, origin, places


def _either(edit: Edit, lines: Lines, eol: str) -> tuple[list[str], list[int], list[_Place]]:
    """SEARCH/REPLACE blocks found in the original, as the model saw it when it wrote them.
    Where a block is there nowhere, they are read again one after the other, each found in
    the file as the blocks before left it (aider's reading: a later block may find what an
    earlier one wrote). Where both readings work and give different files, an abstain."""
    try:
        at_once = _at_once(edit, lines, eol)
    except _Ambiguous:
        raise
    except Abstain as exc:
        try:
            out, places = _in_turn(edit, lines, eol)
        except Abstain:
            raise exc from None
        return out, _kept(lines.raw, out, 0), places
    try:
        out, _ = _in_turn(edit, lines, eol)
    except Abstain:
        return at_once
    if out != at_once[0]:
        raise Abstain("the edit blocks give one file when each is found in the original and "
                      "another when each is found after the blocks before it; make each "
                      "SEARCH unique in the file")
    return at_once


def _in_turn(edit: Edit, lines: Lines, eol: str) -> tuple[list[str], list[_Place]]:
    """SEARCH/REPLACE blocks applied one after the other, each found in the file as the
    blocks before left it (aider's reading: a later block may find what an earlier one
    wrote), and found once there."""
    raw = list(lines.raw)
    places = []
    for n, block in enumerate(edit.blocks, 1):
        bare = [line.removesuffix("\r") for line in raw]
        place = _place(block, n, bare, [line.strip() for line in raw], lines.indent_char, 0, [])
        raw[place.lo:place.hi] = [line + eol for line in place.put]
        places.append(place)
    return raw, places


def _kept(old: list[str], new: list[str], base: int) -> list[int]:
    """For each line of ``new``, the index (plus ``base``) of the line of ``old`` it keeps,
    or -1 for a new line."""
    kept = [-1] * len(new)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for a0, b0, size in matcher.get_matching_blocks():
        for d in range(size):
            kept[b0 + d] = base + a0 + d
    return kept


def _place(block: Block, n: int, bare: list[str], keys: list[str], indent_char: str,
           after: int, placed: list[_Place]) -> _Place:
    """Where block ``n`` goes, by the loosest match level needed and the format's hints."""
    if not any(line.strip() for line in block.find):
        raise Abstain(f"edit block {n} has no lines to find: it does not say where its lines go",
                      block.span)
    ranges = _scope(block, keys, bare)
    for level in range(4):
        found = [(lo, hi, put) for lo, hi, put in _matches(block, level, bare, keys, indent_char)
                 if lo >= after and any(r_lo <= lo < r_hi for r_lo, r_hi in ranges)
                 and not any(lo < p.hi and p.lo < hi for p in placed)]
        if not found:
            continue
        if len(found) == 1:
            lo, hi, put = found[0]
            return _Place(lo, hi, put, level)
        if block.line is not None:
            exact = [f for f in found if f[0] == block.line - 1]
            if len(exact) == 1:
                lo, hi, put = exact[0]
                return _Place(lo, hi, put, level, by_number=True)
        where = ", ".join(str(lo + 1) for lo, _, _ in found[:5])
        raise _Ambiguous(f"edit block {n} matches {len(found)} places in the file (lines {where}"
                         f"{', ...' if len(found) > 5 else ''}); give it lines around the change "
                         "that appear once", block.span, len(found))
    raise Abstain(f"edit block {n}'s lines to find are not in the file"
                  + (" after the block before it" if after else ""), block.span)


def _scope(block: Block, keys: list[str], bare: list[str]) -> list[tuple[int, int]]:
    """The ranges [lo, hi) an apply_patch block's ``@@`` scope lines say it starts in: the
    body of each line the innermost scope names (each within the one before; a line that
    opens no body: the rest of the file after it). No scope: the whole file. (Two hunks in
    one function may both name it: a scope line may come before the hunk before.)"""
    ranges = [(0, len(keys))]
    for scope in block.scopes:
        key = scope.strip()
        inner = []
        for lo, hi in ranges:
            for at in range(lo, hi):
                if keys[at] == key or (len(key) >= 4 and keys[at].startswith(key)):
                    inner.append((at, _body_end(at, hi, keys, bare)))
        if not inner:
            raise Abstain(f"the patch's scope line '@@ {scope}' is not in the file", block.span)
        ranges = inner
    return ranges


def _body_end(at: int, hi: int, keys: list[str], bare: list[str]) -> int:
    """Where the block a header line at ``at`` opens ends: the next line with text that is
    not indented deeper (a closing bracket at the header's depth included); ``hi`` where
    the next line with text is not deeper (the header opens nothing)."""
    width = indent_width(bare[at])
    end = at + 1
    while end < hi and not keys[end]:
        end += 1
    if end >= hi or indent_width(bare[end]) <= width:
        return hi
    while end < hi:
        if keys[end] and indent_width(bare[end]) <= width:
            return end + 1 if keys[end][:1] in ")]}" else end
        end += 1
    return hi


def _matches(block: Block, level: int, bare: list[str], keys: list[str], indent_char: str,
             ) -> list[tuple[int, int, list[str]]]:
    """Every place ``block.find`` matches at ``level``: (lo, hi, the lines to put there)."""
    find = block.find
    if level == 3:  # blank lines either side may lack
        want = [k for k, line in enumerate(find) if line.strip()]
        wanted = [find[k].strip() for k in want]
        filled = [k for k, key in enumerate(keys) if key]
        out = []
        for s in range(len(filled) - len(wanted) + 1):
            if [keys[filled[s + d]] for d in range(len(wanted))] == wanted:
                lo, hi = filled[s], filled[s + len(wanted) - 1] + 1
                put = _shifted(block.put, [find[k] for k in want],
                               [bare[filled[s + d]] for d in range(len(wanted))], indent_char)
                if put is not None:
                    out.append((lo, hi, put))
        return out
    size = len(find)
    if level == 0:
        probe = find
        same = lambda k: bare[k:k + size] == probe  # noqa: E731
    elif level == 1:
        probe = [line.rstrip() for line in find]
        same = lambda k: [line.rstrip() for line in bare[k:k + size]] == probe  # noqa: E731
    else:
        probe = [line.strip() for line in find]
        same = lambda k: keys[k:k + size] == probe  # noqa: E731
    first = find[0].strip()
    out = []
    for k in range(len(bare) - size + 1):
        if keys[k] != first or not same(k):
            continue
        put = block.put if level < 2 else _shifted(block.put, find, bare[k:k + size], indent_char)
        if put is not None:
            out.append((k, k + size, put))
    return out


def _shifted(put: list[str], find: list[str], found: list[str], indent_char: str,
             ) -> list[str] | None:
    """``put`` with its indentation moved as the found lines' differs from ``find``'s: one
    shift for all (None where the lines to find were not shifted alike)."""
    shifts = {indent_width(f_line) - indent_width(o_line) for f_line, o_line in zip(find, found)
              if f_line.strip()}
    if len(shifts) != 1:
        return None
    shift = shifts.pop()
    pairs = [(indent_of(f_line), indent_of(o_line)) for f_line, o_line in zip(find, found)
             if f_line.strip()]
    if all(f == o for f, o in pairs):
        return put
    # one string added or taken off every line (alignment spaces after tabs kept as they are)
    f0, o0 = pairs[0]
    if o0.endswith(f0) and all(o == o0[:len(o0) - len(f0)] + f for f, o in pairs):
        add = o0[:len(o0) - len(f0)]
        return [add + line if line.strip() else line for line in put]
    if f0.endswith(o0):
        cut = f0[:len(f0) - len(o0)]
        if all(f == cut + o for f, o in pairs) and all(
                line.startswith(cut) for line in put if line.strip()):
            return [line[len(cut):] if line.strip() else line for line in put]
    return [reindent(line, indent_width(line) - shift, indent_char) if line.strip() else line
            for line in put]
