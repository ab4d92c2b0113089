"""Recognise lazy-edit markers and ``remove`` comments in a sketch line.

A marker is a whole-line comment, in any comment syntax (``#``, ``//``, ``/* */``,
``{/* */}``, ``<!-- -->``, ``--``), whose text is an ellipsis with a few words
(``... existing code ...``, ``... keep calculateTotal ...``) or the usual wording without one
(``// rest of code unchanged``), or that wording in parentheses (``# (unchanged)``). A
``remove`` comment (``// remove Block``, ``# remove `x = 1```) deletes what it names. A bare
``...`` line is a marker in a language where it cannot be code; Python's is code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LineKind", "MarkerInfo", "classify"]

_COMMENT = re.compile(
    r"""^(?:
        \#+\s?(?P<b1>.*?)
      | //+\s?(?P<b2>.*?)
      | \{?\s*/\*+\s?(?P<b3>.*?)\s?\*+/\s*\}?
      | <!--\s?(?P<b4>.*?)\s?-->
      | --\s(?P<b5>.*?)
      | /\*+\s?(?P<b6>.*?)
    )\s*$""",
    re.X,
)
_ELLIPSIS = re.compile(r"\.{3,}|…")
# Marker wording without a leading ellipsis must open the comment, so that a real comment
# ("# for other cases.") is never read as a marker.
_WORDING = re.compile(
    r"^(?:(?:the\s+)?rest of (?:the\s+)?(?:code|file|function|class|method|body|module|test)s?\b"
    r"|(?:keep(?:ing)?\s+)?(?:the\s+)?existing\s+(?:code|imports|methods|functions|tests)\b"
    r"|(?:other|remaining)\s+(?:code|methods|functions|imports|tests)\s+"
    r"(?:unchanged|as before|remains?)"
    r"|unchanged(?:\s+code)?\b|code\s+(?:remains|stays)\s+(?:the\s+same|unchanged)"
    r"|(?:previous|original)\s+code\b"
    # a whole comment in parentheses: "# (unchanged)", "// (rest of file unchanged)"
    r"|\(\s*(?:(?:the\s+)?rest(?:\s+of\s+[\w\s]+?)?\s+unchanged|unchanged(?:\s+code)?"
    r"|existing\s+code|no\s+changes?|same\s+as\s+before|omitted)\s*\)$)",
    re.I,
)
# A bare ellipsis line is a marker where it cannot be code (it is Python's Ellipsis).
_BARE = {"...", "…", ". . ."}
_REMOVE = re.compile(
    r"^(?:remove|removed|removing|delete|deleted|deleting|drop|dropped|dropping)\b[:\s]*(?P<spec>.*)$",
    re.I)
# A deletion noted after the name: "foo removed", "foo() was deleted", "foo: dropped".
_REMOVED_AFTER = re.compile(
    r"^`?(?P<name>[A-Za-z_$][\w$.]*)(?:\(\))?`?\s*:?\s+(?:(?:was|is|has\s+been|got)\s+)?"
    r"(?:removed|deleted|dropped|gone)$", re.I)
# What wraps a placeholder's words: brackets, angle brackets, dashes, stars, ellipses
# ("[... unchanged ...]", "<existing code>", "--- snip ---", "(omitted for brevity)").
_WRAPPERS = " \t[](){}<>-=*~.…:;,'\"`"
# A placeholder in words of its own: every word from the vocabulary below, at least one of
# them one that says "left out" on its own. "existing", "previous" and "original" say it only
# with what was left out ("existing code", not "existing file").
_LEFT_OUT = frozenset({
    "unchanged", "snip", "snipped", "omitted", "omit", "elided", "elide", "elision", "rest",
    "remaining", "untouched", "unmodified", "unaltered", "identical", "brevity", "same",
})
_WHAT = frozenset({
    "code", "implementation", "implementations", "body", "bodies", "imports", "methods",
    "functions", "logic", "contents", "definitions", "helpers", "handlers", "stuff",
})
_FILLER = frozenset({
    "existing", "previous", "original", "file", "function", "method", "class", "classes",
    "module", "import", "line", "lines", "tests", "test", "cases", "fields", "content",
    "section", "part", "parts", "the", "of", "here", "is", "are", "was", "were", "stays", "stay",
    "remains", "remain", "as", "it", "its", "before", "other", "others", "everything", "else",
    "all", "for", "and", "keep", "kept", "more", "no", "changes", "change", "to", "be", "this",
    "that", "in", "left", "out", "so", "on", "etc", "not", "shown", "below", "above", "stays",
}) | _LEFT_OUT | _WHAT
_WORD = re.compile(r"[a-z]+|\d+")
_AS_BEFORE = re.compile(r"\bas (?:it was|is|before)\b")  # "stays as it was", "rest as is"
_KEEP_NAMED = re.compile(r"\bkeep(?:s|ing)?\s+(?:the\s+)?`?(?P<name>[A-Za-z_$][\w$.]*)`?", re.I)
_KEEP_NOT_NAMES = {
    "existing", "the", "rest", "code", "everything", "all", "other", "original", "unchanged",
    "as", "same", "remaining", "previous", "it", "this", "that", "these", "those", "body",
}
_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|'([^']+)'")
_NAME = re.compile(r"(?:the\s+)?([A-Za-z_$][\w$.]*)")
_SPEC_NOISE = {"the", "a", "an", "this", "that", "these", "line", "lines", "block", "code", "old"}


@dataclass(frozen=True)
class MarkerInfo:
    """What a marker or remove comment says beyond its position."""

    keep_name: str | None = None
    remove_quotes: tuple[str, ...] = ()
    remove_name: str | None = None


class LineKind:
    CODE = 0
    MARKER = 1
    REMOVE = 2


def _comment_body(stripped: str) -> str | None:
    if not stripped or stripped[0] not in "#/{<-":
        return None
    m = _COMMENT.match(stripped)
    if not m:
        return None
    for key in ("b1", "b2", "b3", "b4", "b5", "b6"):
        body = m.group(key)
        if body is not None:
            return body.strip()
    return None


def _remove_info(spec: str) -> MarkerInfo:
    spec = _ELLIPSIS.sub(" … ", spec).strip(" .:-…")
    quotes = tuple(next(g for g in m.groups() if g is not None).strip()
                   for m in _QUOTED.finditer(spec))
    if quotes:
        return MarkerInfo(remove_quotes=quotes)
    for word in _NAME.findall(spec):
        name = word.rstrip(".")
        if name.lower() not in _SPEC_NOISE and len(name) > 1:
            return MarkerInfo(remove_name=name)
    return MarkerInfo()


def classify(stripped: str, language: str | None = None) -> tuple[int, MarkerInfo | None]:
    """Classify one stripped sketch line as code, a marker, or a remove comment. A bare
    ``...`` is a marker in a language where it is not code (any but Python, and an unknown
    one: a line of three dots is code nowhere else)."""
    body = _comment_body(stripped)
    if body is None:
        if stripped in _BARE and language not in ("python", None):
            return LineKind.MARKER, MarkerInfo()
        if _bare_placeholder(stripped):
            return LineKind.MARKER, MarkerInfo()
        return LineKind.CODE, None
    core = _ELLIPSIS.sub(" ", body).strip()
    unwrapped = core.strip(_WRAPPERS)
    removal = _REMOVE.match(core) or _REMOVE.match(unwrapped)
    if removal:
        return LineKind.REMOVE, _remove_info(removal.group("spec"))
    after = _REMOVED_AFTER.match(unwrapped)
    if after:
        return LineKind.REMOVE, MarkerInfo(remove_name=after.group("name"))
    # "... existing code ..." leads with its ellipsis; a real comment ("wait for it...") only
    # ends with one, so a trailing ellipsis needs the usual wording too.
    leads = _ELLIPSIS.match(body.lstrip("[(<{ ")) is not None  # "[... unchanged ...]" too
    words = len(core.split())
    if leads and words == 1 and "/" in core and not _WORDING.match(core):
        return LineKind.CODE, None  # "# ... fileio/naming-a-file": a URL or path cut in two
    bare = core.strip(_WRAPPERS)
    if words <= 10 and (leads or _WORDING.match(core) or _WORDING.match(bare)
                        or (not core.endswith(":") and _placeholder_words(bare))
                        or (not bare and _ELLIPSIS.search(body) is not None)):
        keep = _KEEP_NAMED.search(core)
        name = keep.group("name") if keep else None
        if name and name.lower() in _KEEP_NOT_NAMES:
            name = None
        return LineKind.MARKER, MarkerInfo(keep_name=name)
    return LineKind.CODE, None


def _bare_placeholder(stripped: str) -> bool:
    """A placeholder written without a comment (``... existing code ...``, ``[… rest of the
    file …]``, as in a JSON or YAML file, which has no comments): an ellipsis at both ends,
    brackets around them allowed, and placeholder words between. Code never reads so (a
    spread ``...rest`` has no ellipsis after it)."""
    inner = stripped.strip("[](){}<> ")
    if not (_ELLIPSIS.match(inner) and _ELLIPSIS.search(inner[-3:])):
        return False
    core = _ELLIPSIS.sub(" ", inner).strip()
    return bool(core) and (bool(_WORDING.match(core)) or _placeholder_words(core))


def _placeholder_words(text: str) -> bool:
    """Is ``text`` (a comment's words, unwrapped) a placeholder in words of its own: at most
    eight words, each from the placeholder vocabulary or a number, one of them saying "left
    out" (``unchanged``, ``omitted``, ``rest``, ...) or ``existing``/``previous``/``original``
    with what was left out (``code``, ``methods``, ...)? "same" says it only without
    "above"/"below" ("same as above" is a real comment)."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > 8 or len(_WORD.sub("", text.lower()).strip(_WRAPPERS + "'")) > 0:
        return False
    if any(not w.isdigit() and w not in _FILLER for w in words):
        return False
    said = {w for w in words if w in _LEFT_OUT}
    if _AS_BEFORE.search(" ".join(words)):
        said.add("as before")
    if said == {"same"} and ({"above", "below"} & set(words)):
        return False
    return bool(said) or (bool({"existing", "previous", "original"} & set(words))
                          and bool(_WHAT & set(words)))
