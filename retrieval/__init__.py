"""Retrieval: find the parts of a codebase a frontier model needs, fast, on the user's machine.

tree-sitter chunks (``chunker``), a static or transformer embedder (``embedders``), FAISS +
BM25 with score fusion and filters, a Merkle-tree incremental refresh and an atomically
persisted index (``index``) and the registry specialist (``specialist``); its HTTP
endpoints and CLI commands live in the router (``router.api.retrieval``,
``router.commands.retrieval``). Library use::

    from retrieval import Index, Filters
    index = Index.open("~/.complement/indexes/myrepo")
    index.refresh("/path/to/repo")
    for hit in index.search("where is the config parsed", k=10,
                            filters=Filters.make(language="python")):
        print(hit.chunk.path, hit.chunk.start_line, hit.chunk.symbol, hit.score)

Importing this package loads no model and imports neither torch nor faiss.
"""

from retrieval.chunker import Chunk, Chunker
from retrieval.index import Filters, Hit, Index, IndexConfig, RefreshStats

__all__ = ["Chunk", "Chunker", "Filters", "Hit", "Index", "IndexConfig", "RefreshStats"]
