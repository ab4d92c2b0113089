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
          include_hidden: false         # dot-files and dot-folders stay out of the index
          secret_patterns: null         # null: retrieval.files.SECRET_PATTERNS; [] none

Paths given to ``index`` are checked against ``allowed_root`` by ``specialists.paths.
resolve_repo`` (the one check ``/v1/edit`` uses too): ``..`` components, paths outside it
and symlinks that resolve outside it are refused with ``ForbiddenError`` (403 over HTTP),
and so is a path through a dot-folder below it unless ``include_hidden`` is set. An
``allowed_root`` of ``/``, the home directory or a folder holding it is refused at load
(``OptionsError``): its dot-folders hold keys and credentials.
Callers that confined a repository themselves (the edit pipeline, against its own allowed
roots) use ``search_repo``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import field_validator

from specialists.base import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    OptionsError,
    Result,
    Specialist,
    SpecialistError,
    SpecialistOptions,
    UnavailableError,
)
from specialists.paths import resolve_repo, unsafe_root, within

from retrieval.embedders import data_home
from retrieval.index import Filters, Index, IndexConfig

__all__ = ["RetrievalOptions", "RetrievalSpecialist", "index_dir_for"]

NO_ROOT = ("indexing is off: no folder is allowed. Set COMPLEMENT_REPOS to the folder your "
           "repositories live under (e.g. COMPLEMENT_REPOS=~/code complement serve; the default "
           "config reads it), or specialists.<name>.options.allowed_root in the config")


def _root_problem(raw: str) -> str | None:
    reason = unsafe_root(raw)
    if reason is None:
        return None
    return (f"allowed_root {reason}. Set it (COMPLEMENT_REPOS in the default config) to the "
            "folder your repositories live under, e.g. ~/code")


def index_dir_for(base: Path, repo: Path) -> Path:
    """One index directory per repository: its name plus a hash of its full path."""
    digest = hashlib.blake2b(str(repo).encode(), digest_size=6).hexdigest()
    return base / f"{repo.name or 'root'}-{digest}"


class RetrievalOptions(SpecialistOptions):
    allowed_root: str | None = None
    """``/v1/index`` and ``repo`` arguments must lie under it; unset: indexing is off."""
    index_dir: str | None = None
    """Where indexes live (default: ``~/.complement/indexes``)."""
    embedder: str = "static"
    """``static``, ``static-base``, ``minilm``, ``hash:DIM`` or a model directory."""
    index: dict[str, Any] | None = None
    """Any ``retrieval.IndexConfig`` field (``fusion``, ``dense_weight``, ...)."""
    default_repo: str | None = None
    """The repository searched when a request names none."""
    include_hidden: bool = False
    """Index dot-files and dot-folders (``.env``, ``.config/``) too; off: never indexed."""
    secret_patterns: list[str] | None = None
    """File-name globs never indexed; unset: ``retrieval.files.SECRET_PATTERNS``; ``[]``:
    none (index keys and credentials files too)."""

    @field_validator("allowed_root")
    @classmethod
    def _safe_root(cls, value: str | None) -> str | None:
        problem = _root_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value


class RetrievalSpecialist(Specialist):
    kind = "retrieval"
    version = "1"
    Options = RetrievalOptions

    def __init__(self, allowed_root: str | None = None, index_dir: str | None = None,
                 embedder: str = "static", index: Mapping[str, Any] | None = None,
                 default_repo: str | None = None, include_hidden: bool = False,
                 secret_patterns: list[str] | None = None) -> None:
        super().__init__(allowed_root=allowed_root, index_dir=index_dir, embedder=embedder,
                         index=index, default_repo=default_repo,
                         include_hidden=include_hidden, secret_patterns=secret_patterns)
        problem = _root_problem(allowed_root) if allowed_root else None
        if problem:
            raise OptionsError(problem)
        self.allowed_root = Path(allowed_root).expanduser().resolve() if allowed_root else None
        self.index_base = Path(index_dir).expanduser() if index_dir else data_home() / "indexes"
        filters: dict[str, Any] = {"include_hidden": include_hidden}
        if secret_patterns is not None:
            filters["secret_patterns"] = list(secret_patterns)
        try:
            self.config = IndexConfig(**{**filters, **dict(index or {}), "embedder": embedder})
        except TypeError as exc:
            raise OptionsError(f"index: {exc}") from exc
        self.default_repo = default_repo
        self._embedder: Any = None
        self._indexes: dict[Path, Index] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()
        self._last_repo: Path | None = None
        self._loader: threading.Thread | None = None
        self._load_error: str | None = None
        self._started = time.monotonic()

    def setup(self) -> None:
        """Load the embedder in the background: the first build of the default static
        model takes minutes, and the server should answer health checks meanwhile."""
        self._started = time.monotonic()
        self._loader = threading.Thread(target=self._load_embedder, name="retrieval-setup",
                                        daemon=True)
        self._loader.start()

    def _load_embedder(self) -> None:
        from retrieval.loading import load_embedder

        try:
            self._embedder = load_embedder(self.config.embedder)
        except Exception as exc:  # reported by health() and as 503s, never a crash
            self._load_error = f"{type(exc).__name__}: {exc}"

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the embedder has loaded (for command-line use); errors stay for
        the first request to report."""
        if self._loader is not None:
            self._loader.join(timeout)

    def _ready(self) -> None:
        if self._loader is not None and self._loader.is_alive():
            raise UnavailableError("the retrieval embedder is still loading (the first "
                                   "start builds it: a few minutes); retry shortly")
        if self._load_error:
            raise UnavailableError(f"the retrieval embedder failed to load: "
                                   f"{self._load_error}")

    # -- paths --------------------------------------------------------------------------
    def check_path(self, raw: str) -> Path:
        """Resolve a client-given directory inside ``allowed_root`` or raise 403/404."""
        if self.allowed_root is None:
            raise ForbiddenError(NO_ROOT, param="path")
        repo = resolve_repo(raw, [self.allowed_root], param="path", what="path")
        hidden = [p for p in repo.relative_to(self.allowed_root).parts if p.startswith(".")]
        if hidden and not self.config.include_hidden:
            raise ForbiddenError(f"path {raw!r} is inside the hidden folder {hidden[0]!r}: "
                                 "dot-folders hold configuration and credentials and are not "
                                 "indexed (set the retriever's include_hidden: true to allow "
                                 "it)", param="path")
        return repo

    # -- operations ---------------------------------------------------------------------
    def _open(self, repo: Path) -> tuple[Index, threading.Lock]:
        """The repository's index, as it is on disk now: another process serving the same
        config (``complement serve --workers N``) may have refreshed it since it was read."""
        self._ready()
        with self._guard:
            lock = self._locks.setdefault(repo, threading.Lock())
            index = self._indexes.get(repo)
            if index is None or index.stale():
                self._indexes[repo] = Index.open(index_dir_for(self.index_base, repo),
                                                 self.config, self._embedder)
            return self._indexes[repo], lock

    def index_repo(self, raw_path: str, progress: Any = None) -> dict[str, Any]:
        repo = self.check_path(raw_path)
        index, lock = self._open(repo)
        with lock:
            stats = index.refresh(repo, progress)
        self._last_repo = repo
        self._remember_last(repo)
        return {"repo": str(repo), **stats.to_dict()}

    # "the last one indexed" is shared by every process serving this index_dir, so a
    # request reaches the same repository whichever worker answers it
    def _remember_last(self, repo: Path) -> None:
        pointer = self.index_base / "LAST"
        try:
            self.index_base.mkdir(parents=True, exist_ok=True)
            tmp = pointer.with_name(f".LAST.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(str(repo), "utf-8")
            os.replace(tmp, pointer)
        except OSError:  # a read-only index_dir: this process still remembers
            pass

    def _last(self) -> Path | None:
        try:
            last = Path((self.index_base / "LAST").read_text("utf-8").strip())
        except (OSError, ValueError):
            return self._last_repo
        return last if self.allowed_root and within(last, self.allowed_root) else \
            self._last_repo

    def retrieve(self, query: str, k: int = 10, filters: Filters | None = None,
                 repo: str | None = None, mode: str = "hybrid") -> dict[str, Any]:
        if not query.strip():
            raise SpecialistError("query is empty", param="query")
        target = self.check_path(repo) if repo else (
            self.check_path(self.default_repo) if self.default_repo else self._last())
        if target is None:
            # the caller's missing step, not an outage: a 409 that names the step
            raise ConflictError("no repository is indexed yet: POST /v1/index with its "
                                "path first, or pass 'repo'", param="repo")
        index, lock = self._open(target)
        if not index.chunks:
            raise NotFoundError(f"{target} has no index yet: POST /v1/index with its path")
        with lock:
            hits = index.search(query, k=k, filters=filters, mode=mode)
        return {"repo": str(target), "mode": mode, "results": [h.to_dict() for h in hits]}

    def search_repo(self, repo: Path, query: str, k: int = 10, *, build: bool = False,
                    progress: Callable[[str, int, int], None] | None = None
                    ) -> tuple[list[Any], str | None]:
        """Hits for ``query`` in ``repo``, a directory the caller has already confined (the
        edit pipeline checks it against its own allowed roots). An unindexed repository is
        indexed first when ``build`` is set; otherwise no hits, and a note says why."""
        index, lock = self._open(repo)
        note = None
        with lock:
            if not index.chunks:
                if not build:
                    return [], (f"{repo} is not indexed; run `complement index {repo}` "
                                "first (continuing without retrieved context)")
                stats = index.refresh(repo, progress)
                note = (f"{repo} was not indexed: indexed {stats.files_read} files "
                        f"({stats.chunks_total} chunks) in {stats.seconds:.1f}s")
            return index.search(query, k=k), note

    def answer(self, request: Mapping[str, Any]) -> Result:
        """``{"query", "k", "filters", "repo", "mode"}`` -> chunks; abstains on no hit."""
        filters = Filters.make(**dict(request.get("filters") or {}))
        out = self.retrieve(str(request.get("query", "")), int(request.get("k", 10)), filters,
                            request.get("repo"), str(request.get("mode", "hybrid")))
        if not out["results"]:
            return Result.abstain("no chunk matched the query", repo=out["repo"])
        return Result(output=out, confidence=float(out["results"][0]["score"]))

    def health(self) -> dict[str, Any]:
        # the embedder loads in the background: the server answers health checks and the
        # other specialists meanwhile, /readyz says "loading" and retrieval requests 503
        loading = self._loader is not None and self._loader.is_alive()
        return {"ok": not self._load_error, "loading": loading,
                "loading_for_s": round(time.monotonic() - self._started, 1) if loading else None,
                "error": self._load_error, "version": self.version,
                "embedder": self.config.embedder,
                "allowed_root": str(self.allowed_root) if self.allowed_root else None,
                "indexes_open": len(self._indexes)}
