"""BM25 over code: identifier splitting (snake_case, camelCase), stop words, bm25s.

``parse_json_value`` is indexed as ``parse_json_value parse json value``: a query that
says "parse the JSON value" finds it, and so does one naming the identifier.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BM25Index", "Vocabulary", "split_identifier", "tokenize"]

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


class Vocabulary:
    """Word -> id, append-only, so stored documents keep their ids across refreshes."""

    def __init__(self, words: Sequence[str] = ()) -> None:
        self.words: list[str] = list(words)
        self.ids: dict[str, int] = {w: i for i, w in enumerate(self.words)}

    def encode(self, tokens: Sequence[str]) -> tuple["np.ndarray", "np.ndarray"]:
        """(term ids, counts) of one document, adding words not seen before."""
        import numpy as np

        counts: dict[int, int] = {}
        for t in tokens:
            i = self.ids.get(t)
            if i is None:
                i = self.ids[t] = len(self.words)
                self.words.append(t)
            counts[i] = counts.get(i, 0) + 1
        return (np.fromiter(counts.keys(), dtype=np.int32, count=len(counts)),
                np.fromiter(counts.values(), dtype=np.float32, count=len(counts)))


class BM25Index:
    """BM25 (Lucene variant, as bm25s scores it) over per-document term counts.

    bm25s's own ``index()`` walks every token in Python — 4 s for the standard library,
    on every refresh. Here the score matrix is computed with numpy from stored term
    counts (tens of milliseconds) and handed to a ``bm25s.BM25``, which answers queries.
    """

    def __init__(self, rows: Sequence[tuple["np.ndarray", "np.ndarray"]], vocab: Vocabulary,
                 k1: float = 1.2, b: float = 0.75) -> None:
        import bm25s
        import numpy as np
        from scipy import sparse

        self.size = len(rows)
        self.vocab = vocab
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        n_words = max(1, len(vocab.words))
        if rows:
            lengths = np.fromiter((len(r[0]) for r in rows), dtype=np.int64, count=len(rows))
            cols = np.concatenate([r[0] for r in rows]) if lengths.sum() else np.zeros(0, np.int32)
            tf = np.concatenate([r[1] for r in rows]) if lengths.sum() else np.zeros(0, np.float32)
            doc = np.repeat(np.arange(len(rows)), lengths)
            doc_len = np.bincount(doc, weights=tf, minlength=len(rows))
            avg = float(doc_len.mean()) or 1.0
            df = np.bincount(cols, minlength=n_words)
            idf = np.log1p((len(rows) - df + 0.5) / (df + 0.5))
            tfc = tf / (tf + k1 * (1 - b + b * doc_len[doc] / avg))  # bm25s leaves out (k1 + 1)
            mat = sparse.csc_matrix(((idf[cols] * tfc).astype(np.float32), (doc, cols)),
                                    shape=(len(rows), n_words))
        else:
            mat = sparse.csc_matrix((0, n_words), dtype=np.float32)
        self._bm25.scores = {"data": mat.data, "indices": mat.indices.astype(np.int32),
                             "indptr": mat.indptr, "num_docs": self.size}
        self._bm25.vocab_dict = dict(vocab.ids)
        self._bm25.nonoccurrence_array = None  # lucene scoring has no non-occurrence term
        self._n_words = n_words

    def scores(self, query: str) -> "np.ndarray":
        """BM25 score of every document (zeros when no query word is in the vocabulary)."""
        import numpy as np

        if not self.size:
            return np.zeros(0, dtype=np.float32)
        # bm25s 0.3.16 raises on a query none of whose tokens is in the vocabulary
        ids = [i for i in (self.vocab.ids.get(t) for t in tokenize(query))
               if i is not None and i < self._n_words]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)
