"""The ``retrieval`` suite: commit message → changed file, through each configured retriever.

The task of ``benchmarks/retrieval_stdlib.py`` (task 2), kept small: per project the pool is
every distinct file of that project in the data (its most recent ``before``), indexed once;
the query is a commit message, the answer the commit's path. Routes are retrieval modes
(``bm25``, ``dense``, ``hybrid``) of ``retrieval.Index``; latency is measured here.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from router.evals.suites import Suite, iter_commit_rows

__all__ = ["run_retrieval_suite"]

MODES = ("bm25", "dense", "hybrid")


def _index(rows: list[dict[str, Any]], work: Path, name: str, embedder: str) -> Any:
    from retrieval import Index, IndexConfig

    latest: dict[str, tuple[str, str]] = {}
    for r in rows:
        if r["path"] not in latest or r["date"] > latest[r["path"]][0]:
            latest[r["path"]] = (r["date"], r["before"])
    root = work / name
    for path, (_, text) in latest.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, "utf-8")
    index = Index(work / f"{name}.index", IndexConfig(embedder=embedder, use_gitignore=False))
    index.refresh(root)
    return index


def _ranked_paths(index: Any, query: str, mode: str) -> list[str]:
    ranked: list[str] = []
    for h in index.search(query, k=100, mode=mode):
        if h.chunk.path not in ranked:
            ranked.append(h.chunk.path)
    return ranked


def run_retrieval_suite(suite: Suite, routes: list[str] | None,
                        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    embedder = str(suite.options.get("embedder", "static"))
    modes = routes or list(MODES)
    by_project: dict[str, list[dict[str, Any]]] = {}
    for row in iter_commit_rows(suite.data_path(), suite.projects):
        by_project.setdefault(row["repo"], []).append(row)
    hits: dict[str, list[int | None]] = {m: [] for m in modes}
    lat: dict[str, list[float]] = {m: [] for m in modes}
    n = 0
    with tempfile.TemporaryDirectory(prefix="complement-eval-retrieval-") as tmp:
        for project, rows in sorted(by_project.items()):
            started = time.perf_counter()
            index = _index(rows, Path(tmp), project, embedder)
            queries = random.Random(f"{suite.seed}:{project}").sample(
                rows, min(suite.per_project, len(rows)))
            n += len(queries)
            for mode in modes:
                for q in queries:
                    t0 = time.perf_counter()
                    ranked = _ranked_paths(index, q["message"], mode)
                    lat[mode].append(1000 * (time.perf_counter() - t0))
                    hits[mode].append(ranked.index(q["path"]) + 1 if q["path"] in ranked else None)
            if progress:
                progress(f"retrieval: {project} ({len(queries)} queries) in "
                         f"{time.perf_counter() - started:.0f}s")
    summary = {m: _score(hits[m], lat[m]) for m in modes}
    return {"kind": "retrieval", "suite": suite.name, "routes": modes, "n_tasks": n,
            "projects": sorted(by_project), "summary": {"routes": summary},
            "notes": [f"embedder {embedder}; latency measured on this machine, per query"]}


def _score(ranks: list[int | None], lat: list[float]) -> dict[str, Any]:
    n = max(1, len(ranks))
    ordered = sorted(lat) or [float("nan")]
    return {"n": len(ranks), "acc@1": round(sum(r == 1 for r in ranks) / n, 4),
            "acc@5": round(sum(bool(r and r <= 5) for r in ranks) / n, 4),
            "acc@10": round(sum(bool(r and r <= 10) for r in ranks) / n, 4),
            "mrr@10": round(sum(1 / r for r in ranks if r and r <= 10) / n, 4),
            "query_p50_ms": round(statistics.median(ordered), 3),
            "query_p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
            "mode": "measured"}
