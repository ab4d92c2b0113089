"""Split source files into retrieval chunks along the syntax tree (tree-sitter).

A chunk is a function, method or class, kept whole when it fits ``max_chars``. A larger
definition is split along the children of its body; every piece carries the signature(s)
of the definitions around it (``class Foo:`` / ``def bar(self):``) as context, so a method
cut out of a long class still says where it lives. Small neighbours merge. Comments
directly above a definition (Go, Rust, Java and JS doc comments) belong to it. Files in a
language without a grammar fall back to windows of lines.

Grammars come from the per-language wheels (``tree-sitter-python`` …); nothing is
downloaded at run time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, Iterable

__all__ = ["Chunk", "Chunker", "LANGUAGE_BY_EXT", "language_for"]

LANGUAGE_BY_EXT: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}

# node type -> kind of the definitions each grammar has.
_DEFS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "javascript": {
        "function_declaration": "function", "generator_function_declaration": "function",
        "class_declaration": "class", "method_definition": "method",
    },
    "go": {
        "function_declaration": "function", "method_declaration": "method",
        "type_declaration": "type",
    },
    "rust": {
        "function_item": "function", "function_signature_item": "function",
        "impl_item": "impl", "struct_item": "struct", "enum_item": "enum",
        "trait_item": "trait", "mod_item": "module", "macro_definition": "macro",
        "union_item": "struct",
    },
    "java": {
        "class_declaration": "class", "interface_declaration": "interface",
        "enum_declaration": "enum", "record_declaration": "class",
        "annotation_type_declaration": "interface",
        "method_declaration": "method", "constructor_declaration": "method",
    },
}
_DEFS["typescript"] = {
    **_DEFS["javascript"],
    "abstract_class_declaration": "class", "interface_declaration": "interface",
    "type_alias_declaration": "type", "enum_declaration": "enum",
    "internal_module": "module", "module": "module", "function_signature": "function",
    "abstract_method_signature": "method",
}
_DEFS["tsx"] = _DEFS["typescript"]

_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "class",
                    "generator_function"}
_COMMENTS = {"comment", "line_comment", "block_comment"}


def language_for(path: str) -> str | None:
    """The grammar name for a file path, or None for a file without one."""
    return LANGUAGE_BY_EXT.get(PurePosixPath(path).suffix.lower())


@lru_cache(maxsize=None)
def _parser(language: str) -> Any:
    import tree_sitter as ts

    import importlib

    module = {"python": "tree_sitter_python", "javascript": "tree_sitter_javascript",
              "typescript": "tree_sitter_typescript", "tsx": "tree_sitter_typescript",
              "go": "tree_sitter_go", "rust": "tree_sitter_rust", "java": "tree_sitter_java"}
    if language not in module:
        raise ValueError(f"no grammar for {language!r}")
    mod: Any = importlib.import_module(module[language])
    if language == "typescript":
        raw = mod.language_typescript()
    elif language == "tsx":
        raw = mod.language_tsx()
    else:
        raw = mod.language()
    return ts.Parser(ts.Language(raw))


@dataclass
class Chunk:
    """One retrievable piece of a file. Lines are 1-based and inclusive."""

    path: str
    language: str
    start_line: int
    end_line: int
    text: str
    symbol: str = ""
    kind: str = "block"
    context: list[str] = field(default_factory=list)

    def embed_text(self) -> str:
        """What the embedder and BM25 see: path, enclosing signatures, then the code."""
        head = "\n".join([self.path, *self.context])
        return f"{head}\n{self.text}"

    @property
    def content_hash(self) -> str:
        return hashlib.blake2b(self.embed_text().encode("utf-8"), digest_size=16).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "language": self.language, "start_line": self.start_line,
                "end_line": self.end_line, "text": self.text, "symbol": self.symbol,
                "kind": self.kind, "context": list(self.context)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Chunk":
        return cls(**d)


@dataclass
class _Span:
    """A run of lines (0-based, inclusive) that will become one chunk."""

    start: int
    end: int
    symbol: str = ""
    kind: str = "block"
    context: tuple[str, ...] = ()


class Chunker:
    """Turns (path, text) into chunks. ``max_chars`` bounds a chunk; ``min_chars`` merges."""

    def __init__(self, max_chars: int = 1500, min_chars: int = 200,
                 window_lines: int = 50) -> None:
        self.max_chars = max_chars
        self.min_chars = min_chars
        self.window_lines = window_lines

    # -- public -------------------------------------------------------------------------
    def chunk(self, path: str, text: str, language: str | None = None) -> list[Chunk]:
        language = language or language_for(path)
        lines = text.split("\n")
        if language is None or language not in _DEFS:
            spans = self._windows(lines, 0, len(lines) - 1, "", "block", ())
            return self._to_chunks(path, language or "text", lines, spans)
        tree = _parser(language).parse(text.encode("utf-8"))
        ctx = _Ctx(language, text.encode("utf-8"), lines)
        spans = self._children(ctx, tree.root_node.children, ())
        return self._to_chunks(path, language, lines, spans)

    # -- tree walk ----------------------------------------------------------------------
    def _children(self, ctx: "_Ctx", nodes: Iterable[Any], outer: tuple[str, ...]) -> list[_Span]:
        spans: list[_Span] = []
        loose: list[tuple[int, int]] = []  # non-definition statements waiting to be grouped
        pending_comments: list[Any] = []

        def flush_loose() -> None:
            if loose:
                spans.extend(self._group(ctx.lines, loose, outer))
                loose.clear()

        for node in nodes:
            if not node.is_named:
                continue
            if node.type in _COMMENTS:
                pending_comments.append(node)
                continue
            found = ctx.definition(node)
            if found is None:
                loose.extend((c.start_point.row, c.end_point.row) for c in pending_comments)
                pending_comments.clear()
                loose.append((node.start_point.row, node.end_point.row))
                continue
            start = node.start_point.row
            # comments directly above a definition (doc comments) belong to it
            keep_from = len(pending_comments)
            for i in range(len(pending_comments) - 1, -1, -1):
                if pending_comments[i].end_point.row < start - 1:
                    break
                keep_from, start = i, pending_comments[i].start_point.row
            loose.extend((c.start_point.row, c.end_point.row) for c in pending_comments[:keep_from])
            pending_comments.clear()
            flush_loose()
            spans.extend(self._definition(ctx, node, found, start, outer))
        loose.extend((c.start_point.row, c.end_point.row) for c in pending_comments)
        flush_loose()
        return self._merge(ctx.lines, spans)

    def _definition(self, ctx: "_Ctx", node: Any, found: tuple[Any, str, str], start: int,
                    outer: tuple[str, ...]) -> list[_Span]:
        inner, kind, name = found
        end = node.end_point.row
        symbol = ".".join([*ctx.names, name]) if ctx.names and name else name
        if ctx.size(start, end) <= self.max_chars:
            return [_Span(start, end, symbol, kind, outer)]
        body = _body_of(inner)
        named = [c for c in body.children if c.is_named] if body is not None else []
        if not named:
            return self._windows(ctx.lines, start, end, symbol, kind, outer)
        signature = ctx.source[node.start_byte: body.start_byte].decode("utf-8", "replace")
        signature = _compact_signature(signature)
        inner_outer = (*outer, signature)
        ctx.names.append(name or "?")
        try:
            children = self._children(ctx, body.children, inner_outer)
        finally:
            ctx.names.pop()
        for sp in children:
            if not sp.symbol:
                sp.symbol, sp.kind = symbol, kind
        # the lines above the first member (doc comments, decorators, the signature) go
        # with the first piece when they fit, else into pieces of their own
        head_end = (children[0].start if children else named[0].start_point.row) - 1
        spans: list[_Span] = []
        if head_end >= start:
            if children and ctx.size(start, children[0].end) <= self.max_chars:
                children[0].start = start
            else:
                spans = self._windows(ctx.lines, start, head_end, symbol, kind, outer)
        return spans + children

    # -- grouping -----------------------------------------------------------------------
    def _group(self, lines: list[str], runs: list[tuple[int, int]],
               outer: tuple[str, ...]) -> list[_Span]:
        """Pack consecutive non-definition statements into spans under ``max_chars``."""
        out: list[_Span] = []
        cur: _Span | None = None
        size = _Sizer(lines)
        for s, e in runs:
            if cur is not None and size(cur.start, max(e, cur.end)) <= self.max_chars:
                cur.end = max(cur.end, e)
                continue
            if cur is not None:
                out.append(cur)
            if size(s, e) > self.max_chars:
                out.extend(self._windows(lines, s, e, "", "block", outer))
                cur = None
            else:
                cur = _Span(s, e, "", "block", outer)
        if cur is not None:
            out.append(cur)
        return out

    def _merge(self, lines: list[str], spans: list[_Span]) -> list[_Span]:
        """Merge a small span into its neighbour when both share context and fit."""
        size = _Sizer(lines)
        out: list[_Span] = []
        for sp in spans:
            if out:
                prev = out[-1]
                small = size(prev.start, prev.end) < self.min_chars or size(sp.start, sp.end) < self.min_chars
                if (small and prev.context == sp.context and sp.start >= prev.start
                        and size(prev.start, sp.end) <= self.max_chars):
                    names = [n for n in (prev.symbol, sp.symbol) if n]
                    prev.symbol = ", ".join(dict.fromkeys(", ".join(names).split(", "))) if names else ""
                    if prev.kind != sp.kind:
                        prev.kind = sp.kind if prev.kind == "block" else prev.kind
                    prev.end = max(prev.end, sp.end)
                    continue
            out.append(sp)
        return out

    def _windows(self, lines: list[str], start: int, end: int, symbol: str, kind: str,
                 outer: tuple[str, ...]) -> list[_Span]:
        """Cut lines [start, end] into windows of at most ``window_lines`` and ``max_chars``."""
        out: list[_Span] = []
        s = start
        while s <= end:
            e, size = s, len(lines[s]) + 1
            while e + 1 <= end and e + 1 - s < self.window_lines and size + len(lines[e + 1]) + 1 <= self.max_chars:
                e += 1
                size += len(lines[e]) + 1
            out.append(_Span(s, e, symbol, kind, outer))
            s = e + 1
        return out

    def _to_chunks(self, path: str, language: str, lines: list[str],
                   spans: list[_Span]) -> list[Chunk]:
        chunks = []
        for sp in spans:
            text = "\n".join(lines[sp.start: sp.end + 1])
            if not text.strip():
                continue
            chunks.append(Chunk(path, language, sp.start + 1, sp.end + 1, text, sp.symbol,
                                sp.kind, list(sp.context)))
        return chunks


class _Sizer:
    def __init__(self, lines: list[str]) -> None:
        self.offsets = [0]
        for line in lines:
            self.offsets.append(self.offsets[-1] + len(line) + 1)

    def __call__(self, start: int, end: int) -> int:
        return self.offsets[end + 1] - self.offsets[start]


class _Ctx:
    def __init__(self, language: str, source: bytes, lines: list[str]) -> None:
        self.language = language
        self.source = source
        self.lines = lines
        self.size = _Sizer(lines)
        self.defs = _DEFS[language]
        self.names: list[str] = []  # names of the definitions being split, outermost first

    def definition(self, node: Any) -> tuple[Any, str, str] | None:
        """(inner node, kind, name) when ``node`` is a definition, else None."""
        t = node.type
        if t in self.defs:
            return node, self.defs[t], _name_of(node)
        if t == "decorated_definition":
            inner = node.child_by_field_name("definition")
            if inner is not None and inner.type in self.defs:
                return inner, self.defs[inner.type], _name_of(inner)
        if t in ("export_statement", "expression_statement", "ambient_declaration"):
            for child in node.named_children:
                found = self.definition(child)
                if found is not None:
                    return found
        if t in ("lexical_declaration", "variable_declaration"):
            for decl in node.named_children:
                value = decl.child_by_field_name("value")
                if decl.type == "variable_declarator" and value is not None and value.type in _FUNCTION_VALUES:
                    kind = "class" if value.type == "class" else "function"
                    return value, kind, _name_of(decl)
        return None


def _name_of(node: Any) -> str:
    for field_name in ("name", "type"):
        child = node.child_by_field_name(field_name)
        if child is not None:
            return child.text.decode("utf-8", "replace")
    if node.type == "type_declaration":
        for spec in node.named_children:
            child = spec.child_by_field_name("name")
            if child is not None:
                return child.text.decode("utf-8", "replace")
    return ""


def _body_of(node: Any) -> Any:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    if node.type == "type_declaration":  # Go: type X struct { ... }
        for spec in node.named_children:
            typ = spec.child_by_field_name("type")
            if typ is not None:
                for child in typ.named_children:
                    if child.type.endswith("_list"):
                        return child
    for child in node.named_children:  # e.g. Rust struct field lists, TS interface bodies
        if child.type.endswith(("_body", "_list", "block")) and child.named_child_count:
            return child
    return None


def _compact_signature(sig: str) -> str:
    lines = [ln.rstrip() for ln in sig.rstrip().rstrip("{").rstrip().split("\n") if ln.strip()]
    if len(lines) > 4:  # long decorator lists and parameter lists: keep the ends
        lines = [*lines[:1], "    ...", *lines[-2:]]
    return "\n".join(lines)
