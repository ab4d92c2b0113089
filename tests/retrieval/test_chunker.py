from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.chunker import Chunker, language_for

LANG_DIR = Path(__file__).parent / "fixtures" / "languages"

# file -> (language, symbols that must each start a chunk of the given kind)
EXPECTED = {
    "sample.py": ("python", {"Greeter.__init__": "function", "Greeter.greet": "function",
                             "parse_config_file": "function"}),
    "sample.js": ("javascript", {"addNumbers": "function", "Counter.increment": "method",
                                 "joinPaths": "function"}),
    "sample.ts": ("typescript", {"User": "interface", "UserStore.add": "method",
                                 "makeUser": "function"}),
    "sample.tsx": ("tsx", {"Button": "function", "Card": "function"}),
    "sample.go": ("go", {"Server": "type", "Start": "method", "NewServer": "function"}),
    "sample.rs": ("rust", {"Cache.new": "function", "Store": "trait", "checksum": "function"}),
    "Sample.java": ("java", {"Sample.deposit": "method", "Sample.Listener": "interface"}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_language_chunks(name: str) -> None:
    language, symbols = EXPECTED[name]
    text = (LANG_DIR / name).read_text()
    assert language_for(name) == language
    chunks = Chunker(max_chars=120, min_chars=1).chunk(name, text)
    by_symbol = {c.symbol: c for c in chunks}
    for symbol, kind in symbols.items():
        assert symbol in by_symbol, (symbol, [c.symbol for c in chunks])
        assert by_symbol[symbol].kind == kind
        assert by_symbol[symbol].language == language
    lines = text.split("\n")
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.text == "\n".join(lines[c.start_line - 1: c.end_line])


def test_whole_file_fits_in_few_chunks() -> None:
    text = (LANG_DIR / "sample.py").read_text()
    chunks = Chunker(max_chars=5000, min_chars=200).chunk("sample.py", text)
    joined = "\n".join(c.text for c in chunks)
    assert "def greet" in joined and "def parse_config_file" in joined
    assert len(chunks) <= 3  # small neighbours merged


def test_split_method_carries_enclosing_signatures() -> None:
    body = "\n".join(f"        total += {i}" for i in range(60))
    text = f"class Big:\n    def huge(self, x):\n        total = 0\n{body}\n        return total\n"
    chunks = Chunker(max_chars=300, min_chars=10).chunk("big.py", text)
    assert len(chunks) > 3
    for c in chunks[1:]:
        assert c.context == ["class Big:", "def huge(self, x):"]
        assert c.symbol == "Big.huge"
        assert "Big.huge" in c.symbol and c.embed_text().startswith("big.py\nclass Big:\n")


def test_doc_comment_attached_to_go_function() -> None:
    text = (LANG_DIR / "sample.go").read_text()
    chunks = Chunker(max_chars=400, min_chars=1).chunk("sample.go", text)
    start = next(c for c in chunks if c.symbol == "Start")
    assert start.text.startswith("// Start starts the server.")


def test_other_text_falls_back_to_line_windows() -> None:
    text = "\n".join(f"line {i}" for i in range(120))
    chunks = Chunker(window_lines=50).chunk("notes.md", text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 50), (51, 100), (101, 120)]
    assert all(c.language == "text" for c in chunks)


def test_broken_source_still_chunks() -> None:
    chunks = Chunker().chunk("bad.py", "def f(:\n    return 1\nclass\n")
    assert chunks and all(c.text for c in chunks)
