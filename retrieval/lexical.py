"""BM25 over code: identifier splitting (snake_case, camelCase), stop words, bm25s.

``parse_json_value`` is indexed as ``parse_json_value parse json value``: a query that
says "parse the JSON value" finds it, and so does one naming the identifier.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BM25Index", "split_identifier", "tokenize"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL = re.compile(r"[A-Z]+\d*(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")
STOP_WORDS = frozenset("""
a an and are as at be been but by for from has have if in into is it its of on or that the
their then there these this those to was were will with which when where who whom why how
what not no can may should would could do does did so such than too very s t just also all
any each other some only own same self
""".split())


def split_identifier(word: str) -> list[str]:
    """``parseHTTPResponse_v2`` -> ``["parse", "http", "response", "v2"]`` (lower case)."""
    parts: list[str] = []
    for piece in word.split("_"):
        if piece:
            parts.extend(p.lower() for p in _CAMEL.findall(piece))
    return parts


def tokenize(text: str) -> list[str]:
    """Identifiers whole and split, lower-cased, stop words dropped."""
    out: list[str] = []
    for word in _WORD.findall(text):
        low = word.lower()
        parts = split_identifier(word)
        if len(parts) > 1:
            if len(low) > 1:
                out.append(low)
            out.extend(p for p in parts if len(p) > 1 and p not in STOP_WORDS)
        elif len(low) > 1 and low not in STOP_WORDS:
            out.append(low)
    return out


class BM25Index:
    """bm25s over pre-tokenised documents, scoring every document for a query."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        import bm25s

        self.size = len(docs)
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        if docs:
            self._bm25.index([list(d) for d in docs], show_progress=False)

    def scores(self, query: str) -> "np.ndarray":
        """BM25 score of every document (zeros when no query word is in the vocabulary)."""
        import numpy as np

        if not self.size:
            return np.zeros(0, dtype=np.float32)
        vocab = self._bm25.vocab_dict
        # bm25s 0.3.16 raises on a query none of whose tokens is in the vocabulary
        tokens = [t for t in tokenize(query) if t in vocab]
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)
