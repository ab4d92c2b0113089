from __future__ import annotations

from retrieval.lexical import BM25Index, split_identifier, tokenize


def test_split_identifier() -> None:
    assert split_identifier("parseHTTPResponse_v2") == ["parse", "http", "response", "v2"]
    assert split_identifier("snake_case_name") == ["snake", "case", "name"]
    assert split_identifier("XMLParser") == ["xml", "parser"]


def test_tokenize_keeps_whole_and_split_identifiers() -> None:
    toks = tokenize("def read_config_file(self): return self.cfg")
    assert "read_config_file" in toks and {"read", "config", "file"} <= set(toks)
    assert "self" not in toks  # stop word


def test_query_without_vocabulary_words_does_not_raise() -> None:
    bm25 = BM25Index([tokenize("def add(a, b): return a + b"), tokenize("class Parser: pass")])
    assert bm25.scores("a + b").tolist() == [0.0, 0.0]  # bm25s 0.3.16 raises here unguarded
    assert bm25.scores("zzz unknown").max() == 0.0
    assert bm25.scores("parser").argmax() == 1


def test_empty_index_scores() -> None:
    assert BM25Index([]).scores("anything").shape == (0,)
