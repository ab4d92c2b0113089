"""The persisted retrieval index: chunks, vectors, BM25, and the Merkle tree they came from.

Library use (the edit pipeline calls this)::

    from retrieval import Index, Filters
    index = Index.open("~/.complement/indexes/myrepo")      # empty if new, rebuilt if bad
    stats = index.refresh("/path/to/repo")                  # incremental; saves atomically
    hits = index.search("parse the config file", k=10,
                        filters=Filters(path_glob=["src/**"], language=["python"]))

On disk a directory holds generations ``gen-000001/``…; the file ``CURRENT`` names the live
one. A save writes a new generation beside the old, fsyncs it, then swaps ``CURRENT`` with
``os.replace``: a crash at any point leaves the previous generation live. Every file's
checksum, the format version, the embedder and the chunking settings are stamped in
``meta.json``; an index that fails any check is rebuilt with a message, never a crash.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from retrieval.chunker import Chunk, Chunker
from retrieval.files import FileFilter, decode_source, scan
from retrieval.fusion import linear_fusion, rrf_fusion
from retrieval.lexical import BM25Index, Vocabulary, split_identifier, tokenize
from retrieval.merkle import FileState, Tree, diff_trees, hash_bytes
from specialists.base import SpecialistError
from specialists.paths import ConfinedRoot

if TYPE_CHECKING:
    import numpy as np

    from retrieval.embedders import Embedder

__all__ = ["FORMAT_VERSION", "Filters", "Hit", "Index", "IndexConfig", "RefreshStats"]

#: 3: hidden and secret-named files are no longer indexed (``files.py``); an index of an
#: older version may hold them, so it is dropped and rebuilt rather than searched
FORMAT_VERSION = 3
log = logging.getLogger(__name__)
Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class IndexConfig:
    """Settings of one index. Chunking settings are stamped; changing them re-chunks."""

    embedder: str = "static"
    max_chunk_chars: int = 1500
    min_chunk_chars: int = 200
    window_lines: int = 50
    max_file_bytes: int = 1_000_000
    include_text: bool = True
    use_gitignore: bool = True
    #: index dot-files and dot-folders too (``.git`` and the other vendored ones stay out)
    include_hidden: bool = False
    #: file-name globs never indexed; None: ``retrieval.files.SECRET_PATTERNS``; [] none
    secret_patterns: list[str] | None = None
    #: extra copies of a chunk's symbol-name words in its BM25 document (a name field)
    symbol_boost: int = 1
    #: above this many chunks the dense index is approximate (FAISS IVF), else exact
    ann_threshold: int = 50_000
    ann_nprobe: int = 16
    #: ``linear`` (min-max normalised score mix) or ``rrf``
    fusion: str = "linear"
    #: weight of the dense retriever in the fusion, tuned on site-packages (BENCHMARKS.md)
    dense_weight: float = 0.4
    rrf_k: int = 60
    #: candidates taken from each retriever before fusing
    candidates: int = 100
    embed_batch: int = 256

    def chunking_stamp(self) -> dict[str, Any]:
        keys = ("max_chunk_chars", "min_chunk_chars", "window_lines", "max_file_bytes",
                "include_text", "use_gitignore", "symbol_boost")
        return {k: getattr(self, k) for k in keys}


@dataclass
class Filters:
    """Query filters: any of the path globs (``src/**/*.py``), any of the languages."""

    path_glob: list[str] | None = None
    language: list[str] | None = None

    @classmethod
    def make(cls, path_glob: str | Sequence[str] | None = None,
             language: str | Sequence[str] | None = None) -> "Filters":
        as_list = lambda v: [v] if isinstance(v, str) else (list(v) if v else None)  # noqa: E731
        return cls(as_list(path_glob), as_list(language))

    def __bool__(self) -> bool:
        return bool(self.path_glob or self.language)

    def accepts(self, chunk: Chunk) -> bool:
        if self.language and chunk.language not in self.language:
            return False
        if self.path_glob:
            return any(fnmatch.fnmatchcase(chunk.path, g) or
                       (g.startswith("**/") and fnmatch.fnmatchcase(chunk.path, g[3:]))
                       for g in self.path_glob)
        return True


@dataclass
class Hit:
    chunk: Chunk
    score: float
    retriever: str  # "bm25", "dense" or "both"
    bm25_rank: int | None = None
    dense_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        return {"path": c.path, "start_line": c.start_line, "end_line": c.end_line,
                "symbol": c.symbol, "kind": c.kind, "language": c.language,
                "score": round(float(self.score), 6), "retriever": self.retriever,
                "bm25_rank": self.bm25_rank, "dense_rank": self.dense_rank,
                "context": c.context, "text": c.text}


@dataclass
class RefreshStats:
    files_seen: int = 0
    files_read: int = 0
    files_added: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_total: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IndexCorrupt(Exception):
    """Raised internally when a stored index fails a check; the caller rebuilds."""


class Index:
    """Chunks of one repository with their vectors and a BM25 index. See module docstring."""

    def __init__(self, directory: str | Path, config: IndexConfig | None = None,
                 embedder: "Embedder | None" = None) -> None:
        self.directory = Path(directory).expanduser()
        self.config = config or IndexConfig()
        self._embedder = embedder
        self.repo: str | None = None
        self.chunks: list[Chunk] = []
        self.hashes: list[str] = []
        self.vocab = Vocabulary()
        self.terms: list[tuple["np.ndarray", "np.ndarray"]] = []  # BM25 (term ids, counts)
        self._lines: list[str] = []  # each chunk's stored JSON line, so a save re-encodes none
        self.vectors: "np.ndarray | None" = None
        self.tree = Tree()
        self.file_skips: dict[str, str] = {}  # path -> reason, for files read but not indexed
        self.scan_skips: dict[str, int] = {}
        self.notice: str | None = None  # set when a stored index was unusable and dropped
        self._bm25: BM25Index | None = None
        self._faiss: Any = None
        self._generation: str | None = None  # the generation this object reflects

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str | Path, config: IndexConfig | None = None,
             embedder: "Embedder | None" = None) -> "Index":
        """Load the index at ``directory``; an absent one is empty, a bad one is dropped
        with a message in ``.notice`` (and the log) and rebuilt by the next refresh."""
        index = cls(directory, config, embedder)
        try:
            try:
                index._load()
            except IndexCorrupt:
                if index._pointer() == index._generation:
                    raise
                index._reset()  # a writer switched generations under us: read the new one
                index._load()
        except IndexCorrupt as exc:
            index.notice = f"index at {index.directory} is unusable ({exc}); rebuilding it"
            log.warning("%s", index.notice)
            index._reset()
        return index

    @property
    def embedder(self) -> "Embedder":
        if self._embedder is None:
            from retrieval.loading import load_embedder

            self._embedder = load_embedder(self.config.embedder)
        return self._embedder

    def _reset(self) -> None:
        self.repo, self.chunks, self.hashes, self.terms, self._lines = None, [], [], [], []
        self.vocab = Vocabulary()
        self.vectors, self.tree, self.file_skips, self.scan_skips = None, Tree(), {}, {}
        self._bm25 = self._faiss = None
        self._generation = None

    def stale(self) -> bool:
        """Whether another writer (another process) has saved a newer generation than the
        one this object holds."""
        return self._pointer() != self._generation

    def _pointer(self) -> str | None:
        try:
            return (self.directory / "CURRENT").read_text().strip()
        except OSError:
            return None

    def _current(self) -> Path | None:
        pointer = self.directory / "CURRENT"
        if not pointer.is_file():
            if self.directory.is_dir() and any(self.directory.glob("gen-*")):
                raise IndexCorrupt("CURRENT is missing")
            return None
        name = pointer.read_text().strip()
        self._generation = name
        gen = self.directory / name
        if not name.startswith("gen-") or not gen.is_dir():
            raise IndexCorrupt(f"CURRENT names {name!r}, which is not there")
        return gen

    def _load(self) -> None:
        import numpy as np

        gen = self._current()
        if gen is None:
            return
        try:
            meta = json.loads((gen / "meta.json").read_text())
        except (OSError, ValueError) as exc:
            raise IndexCorrupt(f"meta.json unreadable: {exc}") from exc
        if meta.get("format_version") != FORMAT_VERSION:
            raise IndexCorrupt(f"format version {meta.get('format_version')} is not "
                               f"{FORMAT_VERSION}")
        for name, digest in meta.get("checksums", {}).items():
            try:
                actual = _file_digest(gen / name)
            except OSError as exc:
                raise IndexCorrupt(f"{name} unreadable: {exc}") from exc
            if actual != digest:
                raise IndexCorrupt(f"{name} checksum mismatch")
        if meta.get("embedder") != self.embedder.name:
            raise IndexCorrupt(f"built with embedder {meta.get('embedder')!r}, configured "
                               f"{self.embedder.name!r}")
        try:
            lines = (gen / "chunks.jsonl").read_text().splitlines()
            rows = [json.loads(line) for line in lines]
            vectors = np.load(gen / "vectors.npy")
            tree = Tree.from_json(json.loads((gen / "tree.json").read_text()))
            vocab = Vocabulary(json.loads((gen / "vocab.json").read_text()))
            with np.load(gen / "terms.npz") as z:
                ids, counts, offsets = z["ids"], z["counts"], z["offsets"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexCorrupt(f"unreadable: {exc}") from exc
        if len(offsets) != len(rows) + 1:
            raise IndexCorrupt("term table does not match the chunks")
        if vectors.shape != (len(rows), self.embedder.dim) and len(rows):
            raise IndexCorrupt(f"vectors shape {vectors.shape} does not match "
                               f"{len(rows)} chunks x {self.embedder.dim}")
        self.chunks = [Chunk.from_dict(r["chunk"]) for r in rows]
        self.hashes = [r["hash"] for r in rows]
        self.terms = [(ids[a:b], counts[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
        self.vocab = vocab
        self._lines = lines
        self.vectors = vectors.astype(np.float32) if len(rows) else None
        self.tree = tree
        self.repo = meta.get("repo")
        self.file_skips = meta.get("file_skips", {})
        self.scan_skips = meta.get("scan_skips", {})
        if meta.get("chunking") != self.config.chunking_stamp():
            # chunking settings changed: keep vectors as an embedding cache, re-chunk all
            self.notice = "chunking settings changed since the last build; re-chunking every file"
            log.warning("%s", self.notice)
            self.tree = Tree()
        self._build_search()

    # -- refreshing ---------------------------------------------------------------------
    def refresh(self, repo: str | Path, progress: Progress | None = None) -> RefreshStats:
        """Bring the index up to date with ``repo``: re-read changed files only, embed
        only chunks whose content hash is new, then save atomically. Writers to one
        directory take turns (a file lock); one that finds a newer generation on disk
        than it loaded starts from that one."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with _locked(self.directory / ".lock"):
            if self._pointer() != self._generation:
                try:
                    self._reset()
                    self._load()
                except IndexCorrupt as exc:
                    self.notice = f"index at {self.directory} is unusable ({exc}); rebuilding it"
                    self._reset()
            try:
                return self._refresh(repo, progress)
            except BaseException:
                self._generation = None  # memory may be ahead of disk: reload next time
                raise

    def _refresh(self, repo: str | Path, progress: Progress | None) -> RefreshStats:
        t0 = time.perf_counter()
        root = Path(repo).expanduser().resolve()
        if not root.is_dir():
            raise NotADirectoryError(f"{root} is not a directory")
        stats = RefreshStats(notice=self.notice)
        if self.repo is not None and self.repo != str(root):
            stats.notice = f"index was built for {self.repo}; rebuilding for {root}"
            log.warning("%s", stats.notice)
            self.tree = Tree()
        cfg = self.config
        found = scan(root, FileFilter(cfg.max_file_bytes, cfg.include_text, cfg.use_gitignore,
                                      cfg.include_hidden, cfg.secret_patterns))
        stats.files_seen = len(found.files)
        # every read opens each component with O_NOFOLLOW: a file swapped for a link since
        # the scan (to a secret outside the repository) is skipped, never read through
        with ConfinedRoot(root) as confined:
            new_tree, contents = self._hash_files(confined, found.files, stats, found.skipped)
            return self._update(root, confined, found.skipped, new_tree, contents, stats, t0,
                                progress)

    def _update(self, root: Path, confined: ConfinedRoot, scan_skips: Counter[str],
                new_tree: Tree, contents: dict[str, bytes], stats: RefreshStats, t0: float,
                progress: Progress | None) -> RefreshStats:
        added, changed, removed = diff_trees(self.tree, new_tree)
        stats.files_added, stats.files_changed, stats.files_removed = len(added), len(changed), len(removed)
        if not (added or changed or removed) and self.repo == str(root) and self.notice is None:
            stats.chunks_total = len(self.chunks)
            stats.skipped = self._skip_counts()
            stats.seconds = time.perf_counter() - t0
            return stats
        dropped = set(added) | set(changed) | set(removed)
        keep = [i for i, c in enumerate(self.chunks) if c.path not in dropped and c.path in new_tree.files]
        for path in dropped:
            self.file_skips.pop(path, None)
        new_chunks = self._chunk_files(confined, sorted(added + changed), contents, progress)
        self._assemble(keep, new_chunks, stats, progress)
        self.tree = new_tree
        self.repo = str(root)
        self.scan_skips = dict(scan_skips)
        self.notice = None
        self._build_search()
        self.save()
        stats.chunks_total = len(self.chunks)
        stats.skipped = self._skip_counts()
        stats.seconds = time.perf_counter() - t0
        return stats

    def _hash_files(self, confined: ConfinedRoot, files: dict[str, os.stat_result],
                    stats: RefreshStats, skipped: Counter[str]) -> tuple[Tree, dict[str, bytes]]:
        """New Merkle leaves: reuse a stored hash when size and mtime are unchanged. What is
        kept is what was read (its stat from the open file), never what the scan saw."""
        tree = Tree()
        contents: dict[str, bytes] = {}
        limit = self.config.max_file_bytes
        for rel, scanned in files.items():
            old = self.tree.files.get(rel)
            if old is not None and old.same_stat(scanned):
                tree.files[rel] = old
                continue
            try:
                data, st = confined.fetch(rel, max_bytes=limit)
            except SpecialistError:  # a link or a special file swapped in since the scan
                skipped["symlink_or_special"] += 1
                continue
            except OSError:
                skipped["unreadable"] += 1
                continue
            if len(data) > limit:
                skipped["oversized"] += 1
                continue
            stats.files_read += 1
            contents[rel] = data
            tree.files[rel] = FileState(st.st_size, st.st_mtime_ns, hash_bytes(data))
        return tree, contents

    def _chunk_files(self, confined: ConfinedRoot, paths: list[str], contents: dict[str, bytes],
                     progress: Progress | None) -> list[Chunk]:
        cfg = self.config
        chunker = Chunker(cfg.max_chunk_chars, cfg.min_chunk_chars, cfg.window_lines)
        out: list[Chunk] = []
        for n, path in enumerate(paths, 1):
            data = contents.get(path)
            if data is None:
                try:
                    data = confined.read(path, max_bytes=cfg.max_file_bytes)
                except (OSError, SpecialistError):
                    self.file_skips[path] = "unreadable"
                    continue
            text, reason = decode_source(data)
            if text is None:
                self.file_skips[path] = reason or "unreadable"
                continue
            try:
                out.extend(chunker.chunk(path, text))
            except Exception as exc:  # a parser failure skips one file, never the index
                log.warning("could not chunk %s: %s", path, exc)
                self.file_skips[path] = "parse_error"
            if progress and (n % 50 == 0 or n == len(paths)):
                progress("chunk", n, len(paths))
        return out

    def _assemble(self, keep: list[int], new_chunks: list[Chunk], stats: RefreshStats,
                  progress: Progress | None) -> None:
        """Kept chunks + new ones; vectors reused by content hash, the rest embedded."""
        import numpy as np

        by_hash: dict[str, int] = {h: i for i, h in enumerate(self.hashes)}
        new_hashes = [c.content_hash for c in new_chunks]
        todo: dict[str, Chunk] = {}
        for h, c in zip(new_hashes, new_chunks):
            if h not in by_hash and h not in todo:
                todo[h] = c
        fresh = self._embed(list(todo.values()), progress)
        fresh_row = {h: i for i, h in enumerate(todo)}
        dim = self.embedder.dim
        old = self.vectors if self.vectors is not None else np.zeros((0, dim), np.float32)
        added = [old[by_hash[h]] if h in by_hash else fresh[fresh_row[h]] for h in new_hashes]
        kept = old[np.asarray(keep, dtype=np.int64)]
        stats.chunks_embedded = len(todo)
        stats.chunks_reused = len(new_chunks) - len(todo)
        self.chunks = [self.chunks[i] for i in keep] + new_chunks
        self.hashes = [self.hashes[i] for i in keep] + new_hashes
        self.terms = [self.terms[i] for i in keep] + [self.vocab.encode(self._doc_tokens(c))
                                                      for c in new_chunks]
        self._lines = [self._lines[i] for i in keep] + [
            json.dumps({"chunk": c.to_dict(), "hash": h}) for c, h in zip(new_chunks, new_hashes)]
        vectors = np.concatenate([kept, np.asarray(added, np.float32).reshape(-1, dim)])
        self.vectors = vectors.astype(np.float32) if len(vectors) else None

    def _embed(self, chunks: list[Chunk], progress: Progress | None) -> "np.ndarray":
        import numpy as np

        if not chunks:
            return np.zeros((0, self.embedder.dim), np.float32)
        batch = self.config.embed_batch
        parts = []
        for s in range(0, len(chunks), batch):
            parts.append(self.embedder.encode([c.embed_text() for c in chunks[s: s + batch]]))
            if progress:
                progress("embed", min(s + batch, len(chunks)), len(chunks))
        return np.concatenate(parts)

    def _doc_tokens(self, chunk: Chunk) -> list[str]:
        words = tokenize(chunk.embed_text())
        names = [p for sym in chunk.symbol.split(", ") for part in sym.split(".")
                 for p in (split_identifier(part) or [])]
        return words + names * self.config.symbol_boost

    def _skip_counts(self) -> dict[str, int]:
        counts = Counter(self.scan_skips)
        counts.update(self.file_skips.values())
        return dict(counts)

    # -- searching ----------------------------------------------------------------------
    def _build_search(self) -> None:
        self._bm25 = BM25Index(self.terms, self.vocab)
        self._faiss = None
        if self.vectors is None or not len(self.vectors):
            return
        import faiss

        n, dim = self.vectors.shape
        index: Any
        if n <= self.config.ann_threshold:
            index = faiss.IndexFlatIP(dim)
        else:  # approximate: inverted lists over k-means cells, probed nprobe at a time
            nlist = int(4 * n ** 0.5)
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist,
                                       faiss.METRIC_INNER_PRODUCT)
            index.train(self.vectors[:: max(1, n // (nlist * 39))])
            index.nprobe = self.config.ann_nprobe
        index.add(self.vectors)
        self._faiss = index

    def _allowed(self, filters: Filters | None) -> "np.ndarray | None":
        import numpy as np

        if not filters:
            return None
        return np.fromiter((i for i, c in enumerate(self.chunks) if filters.accepts(c)),
                           dtype=np.int64)

    def _dense_top(self, query: str, n: int, allowed: "np.ndarray | None") -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
        """(ids, scores) of the top ``n`` by the dense retriever, plus the query vector."""
        import faiss
        import numpy as np

        q = self.embedder.encode_query(query).astype(np.float32)
        _single_thread_faiss()
        if self._faiss is None or n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), q
        params: Any = None
        if allowed is not None:
            sel = faiss.IDSelectorBatch(allowed)
            if isinstance(self._faiss, faiss.IndexIVF):
                params = faiss.SearchParametersIVF(sel=sel, nprobe=self.config.ann_nprobe)  # type: ignore[call-arg]
            else:
                params = faiss.SearchParameters(sel=sel)  # type: ignore[call-arg]
        scores, ids = self._faiss.search(q[None, :], n, params=params)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), scores[0][keep], q

    def _bm25_top(self, scores: "np.ndarray", n: int, allowed: "np.ndarray | None") -> "np.ndarray":
        import numpy as np

        if allowed is not None:
            masked = np.full_like(scores, -1.0)
            masked[allowed] = scores[allowed]
            scores = masked
        n = min(n, len(scores))
        if n == 0:
            return np.zeros(0, np.int64)
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return top[scores[top] > 0]

    def search(self, query: str, k: int = 10, filters: Filters | None = None,
               mode: str = "hybrid") -> list[Hit]:
        """The ``k`` best chunks for ``query``: ``mode`` is hybrid, bm25 or dense."""
        import numpy as np

        if not self.chunks or self._bm25 is None:
            return []
        allowed = self._allowed(filters)
        if allowed is not None and not len(allowed):
            return []
        pool = max(self.config.candidates, k)
        lex_scores = self._bm25.scores(query) if mode != "dense" else np.zeros(0, np.float32)
        lex_ids = self._bm25_top(lex_scores, pool, allowed) if mode != "dense" else np.zeros(0, np.int64)
        if mode == "bm25":
            return [Hit(self.chunks[i], float(lex_scores[i]), "bm25", r, None)
                    for r, i in enumerate(lex_ids[:k].tolist(), 1)]
        dense_ids, dense_scores, q = self._dense_top(query, pool, allowed)
        if mode == "dense":
            return [Hit(self.chunks[i], float(s), "dense", None, r)
                    for r, (i, s) in enumerate(zip(dense_ids[:k].tolist(), dense_scores[:k].tolist()), 1)]
        return self._fuse(lex_ids, dense_ids, lex_scores, q, k)

    def _fuse(self, lex_ids: "np.ndarray", dense_ids: "np.ndarray", lex_scores: "np.ndarray",
              q: "np.ndarray", k: int) -> list[Hit]:
        import numpy as np

        lex_rank = {i: r for r, i in enumerate(lex_ids.tolist(), 1)}
        dense_rank = {i: r for r, i in enumerate(dense_ids.tolist(), 1)}
        cfg = self.config
        if cfg.fusion == "rrf":
            fused = rrf_fusion(lex_ids, dense_ids, cfg.rrf_k, cfg.dense_weight)
            cand = np.fromiter(fused, dtype=np.int64, count=len(fused))
            scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
        else:
            cand = np.unique(np.concatenate([lex_ids, dense_ids]))
            assert self.vectors is not None
            scores = linear_fusion(cand, lex_scores[cand], self.vectors[cand] @ q, cfg.dense_weight)
        order = np.argsort(-scores, kind="stable")[:k]
        hits = []
        for j in order.tolist():
            i = int(cand[j])
            lr, dr = lex_rank.get(i), dense_rank.get(i)
            who = "both" if lr and dr else ("bm25" if lr else "dense")
            hits.append(Hit(self.chunks[i], float(scores[j]), who, lr, dr))
        return hits

    # -- saving -------------------------------------------------------------------------
    def save(self) -> Path:
        """Write a new generation and switch ``CURRENT`` to it atomically."""
        import numpy as np

        self.directory.mkdir(parents=True, exist_ok=True)
        gens = sorted(p.name for p in self.directory.glob("gen-*"))
        number = int(gens[-1].split("-")[1]) + 1 if gens else 1
        name = f"gen-{number:06d}"
        tmp = self.directory / f".tmp-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        (tmp / "chunks.jsonl").write_text("".join(line + "\n" for line in self._lines), "utf-8")
        vectors = self.vectors if self.vectors is not None else np.zeros((0, self.embedder.dim), np.float32)
        with open(tmp / "vectors.npy", "wb") as fh:
            np.save(fh, vectors)
        lengths = [len(t[0]) for t in self.terms]
        with open(tmp / "terms.npz", "wb") as fh:
            np.savez(fh, offsets=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]),
                     ids=np.concatenate([t[0] for t in self.terms] or [np.zeros(0, np.int32)]),
                     counts=np.concatenate([t[1] for t in self.terms] or [np.zeros(0, np.float32)]))
        (tmp / "vocab.json").write_text(json.dumps(self.vocab.words))
        (tmp / "tree.json").write_text(json.dumps(self.tree.to_json()))
        files = ["chunks.jsonl", "vectors.npy", "terms.npz", "vocab.json", "tree.json"]
        meta = {
            "format_version": FORMAT_VERSION, "embedder": self.embedder.name,
            "dim": self.embedder.dim, "repo": self.repo, "chunks": len(self.chunks),
            "chunking": self.config.chunking_stamp(), "file_skips": self.file_skips,
            "scan_skips": self.scan_skips, "created": time.time(),
            "checksums": {f: _file_digest(tmp / f) for f in files},
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        for f in [*files, "meta.json"]:
            _fsync(tmp / f)
        os.rename(tmp, self.directory / name)
        pointer_tmp = self.directory / f".CURRENT.{os.getpid()}"
        pointer_tmp.write_text(name + "\n")
        _fsync(pointer_tmp)
        os.replace(pointer_tmp, self.directory / "CURRENT")  # the commit point
        self._generation = name
        _fsync_dir(self.directory)
        self._cleanup(keep=name)
        return self.directory / name

    def _cleanup(self, keep: str) -> None:
        for p in self.directory.iterdir():
            if p.name != keep and (p.name.startswith("gen-") or p.name.startswith(".tmp-")):
                shutil.rmtree(p, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        langs = Counter(c.language for c in self.chunks)
        return {"directory": str(self.directory), "repo": self.repo, "chunks": len(self.chunks),
                "files": len({c.path for c in self.chunks}), "languages": dict(langs),
                "skipped": self._skip_counts(),
                "embedder": self._embedder.name if self._embedder else self.config.embedder}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; a no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_FAISS_THREADS_SET = False


def _single_thread_faiss() -> None:
    """One query at a time is fastest on one thread: FAISS's OpenMP pool spin-waits, and
    on a busy 2-core machine that turned a 1 ms search into tens of milliseconds."""
    global _FAISS_THREADS_SET
    if not _FAISS_THREADS_SET:
        import faiss

        faiss.omp_set_num_threads(1)
        _FAISS_THREADS_SET = True


def _file_digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        _fsync(path)
    except OSError:  # some filesystems cannot fsync a directory; the rename still stands
        pass


def iter_hits(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    return [h.to_dict() for h in hits]
