"""Write lazy sketches of a real edit the way frontier models write them.

``make_sketch(before, after, language, k)`` keeps the changed lines of ``after`` with ``k``
lines of context (or the whole enclosing definition), replaces each unchanged span with one
marker at the span's indentation in the file's comment syntax (wording sampled from the
conventions in the wild), and shows deletions by context or by a ``remove`` comment. Noisy
variants shift the indentation, drop the first or last marker, or drop a blank line.

Conventions where a sketch would otherwise say nothing (documented in BENCHMARKS.md):

* ``k = 0`` and a pure insertion: the insertion keeps its two neighbours, since a line with
  no context at all can go anywhere.
* a deletion with no context on one side (file start or end, or ``k = 0``) is shown by a
  ``remove`` comment naming the definition it deletes or quoting its first and last lines;
  at ``k = 0`` a replacement whose old lines do not pair with new ones quotes them the same
  way.

The sketch is labelled ``unique`` when every block's first and last context lines, and each
line a ``remove`` comment quotes, occur once in ``before``; otherwise ``ambiguous``.
"""

from __future__ import annotations

import difflib
import random
from dataclasses import dataclass, field

from specialists.apply.languages import (
    comment_syntax,
    definition_end,
    definition_name,
    definition_start,
)
from specialists.apply.markers import classify
from specialists.apply.text import indent_of, indent_widths, split_lines

__all__ = ["MARKER_WORDINGS", "NOISE", "Sketch", "make_sketch"]

MARKER_WORDINGS = (
    "... existing code ...",
    "... rest of code ...",
    "... keep existing code ...",
    "... code remains the same",
    "...",
    "... unchanged ...",
    "... rest of the file unchanged ...",
    "... keep {name} ...",
)
NOISE = ("shift", "no_first_marker", "no_last_marker", "drop_blank")


@dataclass
class Sketch:
    """A lazy sketch and what the benchmark needs to know about it."""

    text: str
    label: str  # "unique" or "ambiguous"
    k: int | str
    noise: str | None = None
    roles: list[str] = field(default_factory=list)  # per line: ctx / new / marker / remove
    changed: bool = True  # False when the noise variant did not apply


def _paired(old: list[str], new: list[str]) -> bool:
    """Every old line is similar to a new one, in order: a modification, not a deletion."""
    if len(old) > len(new):
        return False
    start = 0
    for line in old:
        if not line:
            continue
        for idx in range(start, len(new)):
            if difflib.SequenceMatcher(None, line, new[idx]).ratio() >= 0.6:
                start = idx + 1
                break
        else:
            return False
    return True


def _quote(line: str) -> str | None:
    for q in ("`", '"', "'"):
        if q not in line:
            return f"{q}{line}{q}"
    return None


def _remove_text(keys: list[str], widths: list[int], i1: int, i2: int, language: str | None,
                 rng: random.Random) -> str | None:
    body = [i for i in range(i1, i2) if keys[i]]
    if not body:
        return None
    head = body[0]
    while head < body[-1] and keys[head].startswith("@"):
        head += 1
    found = definition_name(keys[head], language)
    if found is not None:
        end = definition_end(keys, widths, head, len(keys), language)
        if definition_start(keys, widths, head, i1) == body[0] and end - 1 == body[-1]:
            kind, name = found
            noun = {"def": "function", "func": "function", "fn": "function"}.get(kind, kind)
            return rng.choice((f"remove {name}", f"remove the {name} {noun}", f"removed {name}()",
                               f"delete {name}"))
    first, last = _quote(keys[body[0]]), _quote(keys[body[-1]])
    if first is None or last is None:
        return None
    return f"remove {first}" if len(body) == 1 else f"remove {first} … {last}"


def _enclosing_definition(keys: list[str], widths: list[int], j1: int, j2: int,
                          language: str | None) -> tuple[int, int] | None:
    """The innermost definition in ``after`` that contains the lines j1..j2."""
    first = next((j for j in range(j1, min(j2, len(keys))) if keys[j]), None)
    if first is None:
        return None
    level = widths[first] + 1
    for h in range(first, -1, -1):
        if not keys[h] or widths[h] >= level:
            continue
        level = widths[h]
        if definition_name(keys[h], language) is not None:
            end = definition_end(keys, widths, h, len(keys), language)
            if end >= j2:
                return definition_start(keys, widths, h), end
        if level == 0:
            return None
    return None


def make_sketch(
    before: str,
    after: str,
    language: str | None = None,
    k: int = 1,
    *,
    whole_function: bool = False,
    deletions: str = "context",
    seed: int = 0,
    noise: str | None = None,
) -> Sketch:
    """A lazy sketch of the edit ``before`` → ``after`` (see the module docstring).

    ``deletions``: ``"context"`` (adjacent context lines show it), ``"remove"`` (a comment
    names it) or ``"mixed"`` (each deletion draws one). ``noise``: one of ``NOISE``.
    """
    rng = random.Random(seed)
    b, a = split_lines(before), split_lines(after)
    bw = indent_widths(b.raw)
    aw = indent_widths(a.raw)
    n_after = len(a.raw)
    keep = [False] * n_after
    changed = [False] * n_after
    removes: dict[int, tuple[str, str]] = {}  # after index -> (indent, comment text)
    ops = difflib.SequenceMatcher(None, b.raw, a.raw, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        for j in range(j1, j2):
            keep[j] = changed[j] = True
        context = k
        if k == 0 and tag == "insert":
            context = 1
        needs_remove = tag == "delete" and (k == 0 or j1 == 0 or j1 >= n_after)
        if tag == "replace" and k == 0 and not _paired(b.keys[i1:i2], a.keys[j1:j2]):
            needs_remove = True
        wants_remove = tag == "delete" and (
            deletions == "remove" or (deletions == "mixed" and rng.random() < 0.5)
        )
        if needs_remove or wants_remove:
            text = _remove_text(b.keys, bw, i1, i2, language, rng)
            if text is None:
                context = max(context, 1)
            else:
                first = next(i for i in range(i1, i2) if b.keys[i])
                removes[j1] = (indent_of(b.raw[first]), text)
        span = _enclosing_definition(a.keys, aw, j1, j2, language) if whole_function else None
        if span is not None:
            for j in range(span[0], span[1]):
                keep[j] = True
        else:
            for j in range(max(0, j1 - context), min(n_after, j2 + context)):
                keep[j] = True
    if b.final_newline != a.final_newline and n_after:
        # The last line's bytes changed (a newline added or removed at the end of the file):
        # a real diff shows it, and a sketch that hid it under a marker could not say so.
        last = n_after - 1
        for j in range(max(0, last - max(k, 1)), n_after):
            keep[j] = True
        changed[last] = True
    kind = k if not whole_function else "function"
    return _render(b, a, keep, changed, removes, language, kind, rng, noise)


def _render(b, a, keep, changed, removes, language, k, rng, noise) -> Sketch:  # type: ignore[no-untyped-def]
    syntax = comment_syntax(language)
    lines: list[str] = []
    roles: list[str] = []
    span: list[int] = []

    def flush() -> None:
        if not span:
            return
        first = next((j for j in span if a.keys[j]), span[0])
        wording = rng.choice(MARKER_WORDINGS)
        if "{name}" in wording:
            name = next((definition_name(a.keys[j], language) for j in span
                         if definition_name(a.keys[j], language)), None)
            wording = f"... keep {name[1]} ..." if name else "... existing code ..."
        lines.append(indent_of(a.raw[first]) + syntax.wrap(wording))
        roles.append("marker")
        span.clear()

    for j in range(len(a.raw) + 1):
        if j in removes:
            flush()
            indent, text = removes[j]
            lines.append(indent + syntax.wrap(text))
            roles.append("remove")
        if j == len(a.raw):
            break
        if keep[j]:
            flush()
            lines.append(a.raw[j])
            roles.append("new" if changed[j] else "ctx")
        else:
            span.append(j)
    flush()
    label = _label(b, lines, roles, language)
    lines, roles, changed = _add_noise(lines, roles, noise, b.indent_char, rng)
    eol = "\r\n" if a.crlf else "\n"
    text = eol.join(line.rstrip("\r") for line in lines)
    if a.final_newline or (roles and roles[-1] == "marker"):
        text += eol
    return Sketch(text=text, label=label, k=k, noise=noise, roles=roles, changed=changed)


def _label(b, lines: list[str], roles: list[str], language: str | None) -> str:  # type: ignore[no-untyped-def]
    """``unique`` when every anchor the sketch offers can land in exactly one place."""
    counts: dict[str, int] = {}
    for key in b.keys:
        counts[key] = counts.get(key, 0) + 1
    block: list[int] = []
    for idx in range(len(lines) + 1):
        role = roles[idx] if idx < len(lines) else "marker"
        if role in ("ctx", "new"):
            block.append(idx)
            continue
        if block:
            # Each side of a block next to a separator is anchored by its edge line, which
            # must be a context line found once in before.
            edges = []
            if block[0] > 0:
                edges.append(block[0])
            if idx < len(lines):
                edges.append(block[-1])
            for edge in edges:
                if roles[edge] != "ctx" or counts.get(lines[edge].strip(), 0) != 1:
                    return "ambiguous"
            if not any(roles[i] == "ctx" for i in block):
                return "ambiguous"
            block = []
        if role == "remove":
            info = classify(lines[idx].strip())[1]
            if info is None:
                return "ambiguous"
            if any(counts.get(q.strip(), 0) != 1 for q in info.remove_quotes):
                return "ambiguous"
            if info.remove_name:
                named = [key for key in b.keys
                         if (definition_name(key, language) or ("", ""))[1] == info.remove_name]
                if len(named) != 1:
                    return "ambiguous"
    return "unique"


def _add_noise(lines: list[str], roles: list[str], noise: str | None, indent_char: str,
               rng: random.Random) -> tuple[list[str], list[str], bool]:
    if noise is None:
        return lines, roles, True
    if noise == "shift":
        pad = "\t" if indent_char == "\t" else rng.choice(("  ", "    "))
        return [pad + line if line.strip() else line for line in lines], roles, True
    if noise == "no_first_marker" and roles and roles[0] == "marker":
        return lines[1:], roles[1:], True
    if noise == "no_last_marker" and roles and roles[-1] == "marker":
        return lines[:-1], roles[:-1], True
    if noise == "drop_blank":
        blanks = [i for i, line in enumerate(lines) if roles[i] == "ctx" and not line.strip()
                  and 0 < i < len(lines) - 1 and roles[i - 1] == roles[i + 1] == "ctx"]
        if blanks:
            drop = rng.choice(blanks)
            return lines[:drop] + lines[drop + 1:], roles[:drop] + roles[drop + 1:], True
    return lines, roles, False
