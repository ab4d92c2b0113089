from __future__ import annotations

from retrieval.lexical import BM25Index, Vocabulary, split_identifier, tokenize


def test_split_identifier() -> None:
    assert split_identifier("parseHTTPResponse_v2") == ["parse", "http", "response", "v2"]
    assert split_identifier("snake_case_name") == ["snake", "case", "name"]
    assert split_identifier("XMLParser") == ["xml", "parser"]


def test_tokenize_keeps_whole_and_split_identifiers() -> None:
    toks = tokenize("def read_config_file(self): return self.cfg")
    assert "read_config_file" in toks and {"read", "config", "file"} <= set(toks)
    assert "self" not in toks  # stop word


def index(*texts: str) -> BM25Index:
    vocab = Vocabulary()
    return BM25Index([vocab.encode(tokenize(t)) for t in texts], vocab)


def test_query_without_vocabulary_words_does_not_raise() -> None:
    bm25 = index("def add(a, b): return a + b", "class Parser: pass")
    assert bm25.scores("a + b").tolist() == [0.0, 0.0]  # bm25s 0.3.16 raises here unguarded
    assert bm25.scores("zzz unknown").max() == 0.0
    assert bm25.scores("parser").argmax() == 1


def test_empty_index_scores() -> None:
    assert BM25Index([], Vocabulary()).scores("anything").shape == (0,)


def test_scores_rank_like_bm25s() -> None:
    import bm25s
    import numpy as np

    texts = ["def add(a, b): return a + b", "class Parser: pass",
             "parse the parser config file parse", "hello world add", "config loader config"]
    ours = index(*texts)
    ref = bm25s.BM25(method="lucene")
    ref.index([tokenize(t) for t in texts], show_progress=False)
    for q in ("parser config", "add hello", "parse"):
        words = [t for t in tokenize(q) if t in ref.vocab_dict]
        assert (np.argsort(-ours.scores(q), kind="stable")[:3]
                == np.argsort(-ref.get_scores(words), kind="stable")[:3]).all()


def test_new_words_after_build_are_ignored_not_fatal() -> None:
    vocab = Vocabulary()
    bm25 = BM25Index([vocab.encode(tokenize("alpha beta"))], vocab)
    vocab.encode(["gamma"])
    assert bm25.scores("gamma").tolist() == [0.0]
