"""Planning an edit: the prompt for each answer format, and reading the answer back.

The frontier is asked for one of three formats (``CHAINS`` says which a strategy tries, in
order): a lazy sketch of each file, SEARCH/REPLACE blocks, or whole files. This module
writes those prompts (in each model family's preferred layout) and parses the answers into
(path, body) pairs. Everything an answer says is untrusted: the paths it names are checked
by ``router.edit.workspace`` before anything reads or writes them.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CHAINS",
    "answer_paths",
    "apply_search_replace",
    "build_messages",
    "merge_search_replace",
    "match_final_newline",
    "parse_blocks",
    "parse_search_replace",
    "sketch_bodies",
]

#: The formats a strategy tries, in order. ``model_apply`` is inserted after ``sketch``
#: when a model-based applier is configured.
CHAINS: dict[str, tuple[str, ...]] = {
    "cascade": ("sketch", "search_replace", "whole_file"),
    "sketch": ("sketch",),
    "search_replace": ("search_replace",),
    "whole_file": ("whole_file",),
}

_FORMAT_RULES = {
    "sketch": (
        "Answer with a lazy sketch of each file you change, in a fenced code block whose info "
        "string is the language and the file path (```python src/app.py). Show only the "
        "changed lines with a few unchanged lines around them; stand for every unchanged "
        "stretch with one comment line in the file's comment syntax: `{marker}`. To delete "
        "code, show the lines around it without it, or write a comment `remove NAME`. "
        "A file that does not exist yet is written whole, with no markers."),
    "search_replace": (
        "Answer with SEARCH/REPLACE blocks. Each block is the file path on its own line, "
        "then `<<<<<<< SEARCH`, the exact current lines (unique in the file), `=======`, "
        "the new lines, and `>>>>>>> REPLACE`. An empty SEARCH creates the file."),
    "whole_file": (
        "Answer with the complete new content of each file you change, in a fenced code "
        "block whose info string is the language and the file path. Omit nothing."),
}
_FAMILY_STYLE = {
    # Claude follows XML-tagged sections closely; GPT models the markdown headings.
    "anthropic": ("<instruction>\n{instruction}\n</instruction>", "<context>\n{body}</context>",
                  "<files>\n{body}</files>"),
    "default": ("## Instruction\n{instruction}", "## Context (read only)\n{body}",
                "## Files you may edit\n{body}"),
}


def _family(model: str) -> str:
    name = model.lower()
    return "anthropic" if "claude" in name or name.startswith("anthropic/") else "default"


def build_messages(instruction: str, files: dict[str, str], context: list[str], fmt: str,
                   model: str) -> list[dict[str, str]]:
    """The chat messages asking ``model`` for the change in format ``fmt``."""
    from router.replay import fence
    from specialists.apply import language_for_path

    marker = "// ... existing code ..." if any(
        language_for_path(p) not in (None, "python") for p in files) else "# ... existing code ..."
    system = ("You are a careful software engineer editing a repository. "
              + _FORMAT_RULES[fmt].format(marker=marker)
              + " Write no explanation outside the blocks.")
    head, ctx, body = _FAMILY_STYLE[_family(model)]
    parts = [head.format(instruction=instruction.strip())]
    if context:
        parts.append(ctx.format(body="".join(context)))
    parts.append(body.format(body="".join(
        fence(text, language_for_path(path), path) for path, text in files.items())))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


# -- reading answers -----------------------------------------------------------------------
_FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n", re.M)


def parse_blocks(answer: str) -> list[tuple[str | None, str]]:
    """Fenced blocks as (path or None, body). The path is the info string's last word with
    a dot or slash in it (```python src/a.py``, ```src/a.py``)."""
    blocks: list[tuple[str | None, str]] = []
    pos = 0
    while True:
        m = _FENCE.search(answer, pos)
        if not m:
            return blocks
        ticks = m.group(1)
        close = re.compile(rf"^{re.escape(ticks[0])}{{{len(ticks)},}}[ \t]*$", re.M)
        end = close.search(answer, m.end())
        if end is None:
            return blocks
        words = m.group(2).split()
        path = next((w for w in reversed(words) if "." in w or "/" in w), None)
        blocks.append((path, answer[m.end():end.start()]))
        pos = end.end()


_SR = re.compile(r"(?:^|\n)([^\n]*)\n<<<<<<< SEARCH\n(.*?)^=======\n(.*?)^>>>>>>> REPLACE",
                 re.S | re.M)


def parse_search_replace(answer: str) -> list[tuple[str, str, str]]:
    """SEARCH/REPLACE blocks as (path, search, replace)."""
    return [(m.group(1).strip().strip("`"), m.group(2), m.group(3)) for m in _SR.finditer(answer)]


def apply_search_replace(text: str, search: str, replace: str) -> tuple[str | None, str | None]:
    """(new text, None) or (None, why). SEARCH holds whole lines of the file and must be
    found in one place: exactly, or ignoring trailing whitespace, one indentation shift or
    blank lines (the applier's ``replace_lines``). An empty SEARCH appends."""
    if not search.strip():
        return (text + replace if text else replace), None
    hits = _whole_line_hits(text, search)
    if len(hits) == 1:  # as written, byte for byte
        return text[:hits[0]] + replace + text[hits[0] + len(search):], None
    if len(hits) > 1:
        return None, f"SEARCH text occurs {len(hits)} times"
    from specialists.apply import replace_lines

    return replace_lines(text, search, replace)


def _whole_line_hits(text: str, search: str) -> list[int]:
    """Where ``search`` occurs in ``text`` as whole lines (starting a line, ending one)."""
    hits = []
    at = text.find(search)
    while at >= 0:
        end = at + len(search)
        if (at == 0 or text[at - 1] == "\n") and (
                search.endswith("\n") or end == len(text) or text[end] in "\r\n"):
            hits.append(at)
        at = text.find(search, at + 1)
    return hits




def _only_path(files: dict[str, str]) -> str | None:
    return next(iter(files)) if len(files) == 1 else None


def sketch_bodies(answer: str, files: dict[str, str]) -> list[tuple[str, str]]:
    out = []
    for path, body in parse_blocks(answer):
        path = path or _only_path(files)
        if path is not None:
            out.append((path, body))
        elif len(files) > 1:
            # one fence, no path on it, the change of several files: a diff or an
            # apply_patch envelope names them (the applier takes each file's part)
            from specialists.apply import edit_names

            out.extend((named, body) for named in edit_names(body, list(files)))
    return out



def answer_paths(fmt: str, answer: str, files: dict[str, str]) -> list[str]:
    """Every path an answer in format ``fmt`` names, as the merge would read it (checked
    before anything of the answer is used)."""
    if fmt == "search_replace":
        only = _only_path(files)
        return [only if (path not in files and only and not ("/" in path or "." in path))
                else path for path, _, _ in parse_search_replace(answer)]
    return [path for path, _ in sketch_bodies(answer, files)]


def merge_search_replace(answer: str, files: dict[str, str]
                         ) -> tuple[dict[str, str] | None, str | None, dict[str, Any]]:
    blocks = parse_search_replace(answer)
    if not blocks:
        return None, "the answer has no SEARCH/REPLACE block (prose only?)", {}
    current = dict(files)
    touched: dict[str, str] = {}
    for i, (path, search, replace) in enumerate(blocks, 1):
        only = _only_path(files)
        if path not in current and only and not ("/" in path or "." in path):
            path = only  # a bare word where the path should be: the one file shown
        text, why = apply_search_replace(current.get(path, ""), search, replace)
        if text is None:
            return None, f"{path}: block {i}: {why}", {"blocks": len(blocks)}
        current[path] = touched[path] = text
    return touched, None, {"blocks": len(blocks)}


def match_final_newline(body: str, original: str) -> str:
    """A fenced block always ends in a newline, so an answer cannot say whether the file
    ends with one: keep the original's missing final newline."""
    if original and not original.endswith("\n") and body.endswith("\n"):
        return body[:-1]
    return body
