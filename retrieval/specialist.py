"""The retriever as a registry specialist (kind ``retrieval``), swappable by config.

Config block (``options`` are constructor arguments)::

    specialists:
      retrieval:
        class: retrieval.specialist:RetrievalSpecialist
        options:
          allowed_root: ~/code          # POST /v1/index refuses anything outside it
          index_dir: ~/.complement/indexes
          embedder: static              # or minilm, or a model directory
          index: {fusion: linear, dense_weight: 0.3}   # any IndexConfig field

Paths given to ``index`` are checked against ``allowed_root``: ``..`` components, paths
outside it and symlinks that resolve outside it are refused with ``Forbidden`` (403).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any, Mapping

from router.errors import BadRequest, Forbidden, NotFound, Unavailable
from specialists.base import Result, Specialist

from retrieval.embedders import data_home
from retrieval.index import Filters, Index, IndexConfig

__all__ = ["RetrievalSpecialist", "index_dir_for"]


def index_dir_for(base: Path, repo: Path) -> Path:
    """One index directory per repository: its name plus a hash of its full path."""
    digest = hashlib.blake2b(str(repo).encode(), digest_size=6).hexdigest()
    return base / f"{repo.name or 'root'}-{digest}"


class RetrievalSpecialist(Specialist):
    kind = "retrieval"
    version = "1"

    def __init__(self, allowed_root: str | None = None, index_dir: str | None = None,
                 embedder: str = "static", index: Mapping[str, Any] | None = None,
                 default_repo: str | None = None, **options: Any) -> None:
        super().__init__(allowed_root=allowed_root, index_dir=index_dir, embedder=embedder,
                         index=index, default_repo=default_repo, **options)
        if options:
            raise TypeError(f"unknown options: {', '.join(sorted(options))}")
        self.allowed_root = Path(allowed_root).expanduser().resolve() if allowed_root else None
        self.index_base = Path(index_dir).expanduser() if index_dir else data_home() / "indexes"
        try:
            self.config = IndexConfig(**{**dict(index or {}), "embedder": embedder})
        except TypeError as exc:
            raise TypeError(f"index: {exc}") from exc
        self.default_repo = default_repo
        self._embedder: Any = None
        self._indexes: dict[Path, Index] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()
        self._last_repo: Path | None = None
        self._loader: threading.Thread | None = None
        self._load_error: str | None = None

    def setup(self) -> None:
        """Load the embedder in the background: the first build of the default static
        model takes minutes, and the server should answer health checks meanwhile."""
        self._loader = threading.Thread(target=self._load_embedder, name="retrieval-setup",
                                        daemon=True)
        self._loader.start()

    def _load_embedder(self) -> None:
        from retrieval.embedders import load_embedder

        try:
            self._embedder = load_embedder(self.config.embedder)
        except Exception as exc:  # reported by health() and as 503s, never a crash
            self._load_error = f"{type(exc).__name__}: {exc}"

    def _ready(self) -> None:
        if self._loader is not None and self._loader.is_alive():
            raise Unavailable("the retrieval embedder is still loading (the first start "
                              "builds it: a few minutes); retry shortly")
        if self._load_error:
            raise Unavailable(f"the retrieval embedder failed to load: {self._load_error}")

    # -- paths --------------------------------------------------------------------------
    def check_path(self, raw: str) -> Path:
        """Resolve a client-given path inside ``allowed_root`` or raise 403/404."""
        if self.allowed_root is None:
            raise Forbidden("indexing is off: set specialists.<name>.options.allowed_root "
                            "in the config to the directory repositories live under")
        if not raw or "\x00" in raw:
            raise BadRequest("path is empty or invalid", param="path")
        if ".." in Path(raw).parts:
            raise Forbidden(f"path {raw!r} contains '..'", param="path")
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.allowed_root / candidate
        if not _within(candidate.absolute(), self.allowed_root):
            raise Forbidden(f"path {raw!r} is outside the allowed root {self.allowed_root}",
                            param="path")
        resolved = candidate.resolve()
        if not _within(resolved, self.allowed_root):  # a symlink that points outside
            raise Forbidden(f"path {raw!r} resolves outside the allowed root", param="path")
        if not resolved.is_dir():
            raise NotFound(f"no directory at {raw!r}", param="path")
        return resolved

    # -- operations ---------------------------------------------------------------------
    def _open(self, repo: Path) -> tuple[Index, threading.Lock]:
        self._ready()
        with self._guard:
            lock = self._locks.setdefault(repo, threading.Lock())
            if repo not in self._indexes:
                self._indexes[repo] = Index.open(index_dir_for(self.index_base, repo),
                                                 self.config, self._embedder)
            return self._indexes[repo], lock

    def index_repo(self, raw_path: str, progress: Any = None) -> dict[str, Any]:
        repo = self.check_path(raw_path)
        index, lock = self._open(repo)
        with lock:
            stats = index.refresh(repo, progress)
        self._last_repo = repo
        return {"repo": str(repo), **stats.to_dict()}

    def retrieve(self, query: str, k: int = 10, filters: Filters | None = None,
                 repo: str | None = None, mode: str = "hybrid") -> dict[str, Any]:
        if not query.strip():
            raise BadRequest("query is empty", param="query")
        target = self.check_path(repo) if repo else (
            self.check_path(self.default_repo) if self.default_repo else self._last_repo)
        if target is None:
            raise Unavailable("no repository is indexed yet: POST /v1/index first, or pass "
                              "'repo'")
        index, lock = self._open(target)
        if not index.chunks:
            raise NotFound(f"{target} has no index yet: POST /v1/index with its path")
        with lock:
            hits = index.search(query, k=k, filters=filters, mode=mode)
        return {"repo": str(target), "mode": mode, "results": [h.to_dict() for h in hits]}

    def answer(self, request: Mapping[str, Any]) -> Result:
        """``{"query", "k", "filters", "repo", "mode"}`` -> chunks; abstains on no hit."""
        filters = Filters.make(**dict(request.get("filters") or {}))
        out = self.retrieve(str(request.get("query", "")), int(request.get("k", 10)), filters,
                            request.get("repo"), str(request.get("mode", "hybrid")))
        if not out["results"]:
            return Result.abstain("no chunk matched the query", repo=out["repo"])
        return Result(output=out, confidence=float(out["results"][0]["score"]))

    def health(self) -> dict[str, Any]:
        # ready while loading: the first start builds the default model (minutes), and the
        # rest of the server should not wait for it; retrieval requests answer 503 meanwhile
        loading = self._loader is not None and self._loader.is_alive()
        return {"ok": not self._load_error, "loading": loading,
                "error": self._load_error, "version": self.version,
                "embedder": self.config.embedder,
                "allowed_root": str(self.allowed_root) if self.allowed_root else None,
                "indexes_open": len(self._indexes)}


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
