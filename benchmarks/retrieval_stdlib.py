"""Retrieval benchmark on code no one here wrote: the running interpreter's standard library.

Task 1, docstring -> function. Corpus: every non-test ``.py`` file of the standard library
(or of ``--corpus DIR``) with every function's docstring removed. Queries: the first
paragraph of each function's docstring (at least 3 words). A hit is a chunk containing the
target's ``def`` line; same-name definitions in one file (overloads, property setters)
count as one target. Reported for BM25, dense and hybrid, with names kept and with every
function's name masked on its ``def`` line. Also: build rate, query latency, and the time
to refresh the index after editing 1 and 50 files.

Task 2, commit message -> changed file, on ``--commits DIR`` (``shared/data/commits``):
per project the pool is every distinct file of that project in the data set (its most
recent ``before`` text), the query is the commit message, the answer the commit's path.

Prints tables, then a JSON summary as the last line. Example::

    nice python benchmarks/retrieval_stdlib.py --commits ../shared/data/commits
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import random
import re
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.loading import load_embedder  # noqa: E402
from retrieval.index import Index, IndexConfig  # noqa: E402

MODES = ("bm25", "dense", "hybrid")
TEST_DIRS = {"test", "tests", "idle_test", "__pycache__", "site-packages", "testing"}


@dataclass
class Query:
    text: str
    path: str
    lines: tuple[int, ...]  # def lines of every same-name definition in the file
    name: str


# -- corpus ---------------------------------------------------------------------------------
def source_files(root: Path, limit: int | None, seed: int = 0) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in TEST_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py") and not name.startswith("test_") and name != "conftest.py":
                files.append(Path(dirpath) / name)
    if limit and limit < len(files):
        files = sorted(random.Random(seed).sample(files, limit))
    return files


def first_paragraph(doc: str) -> str:
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(para.split())


def strip_docstrings(source: str, mask_names: bool) -> tuple[str, list[Query]] | None:
    """The file with function docstrings removed (and names masked), and its queries."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.split("\n")
    drop: set[int] = set()  # 0-based line numbers to delete
    replace: dict[int, str] = {}
    found: dict[str, list[tuple[int, str | None]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node, clean=True)
        found.setdefault(node.name, []).append((node.lineno, doc))
        body0 = node.body[0]
        if doc is not None and isinstance(body0, ast.Expr):
            start, end = body0.lineno - 1, (body0.end_lineno or body0.lineno) - 1
            if start <= node.lineno - 1:
                continue  # docstring on the def line itself: rare, leave it
            if len(node.body) == 1:  # keep the body valid
                indent = re.match(r"\s*", lines[start]).group(0)
                replace[start] = indent + "pass"
                drop.update(range(start + 1, end + 1))
            else:
                drop.update(range(start, end + 1))
        if mask_names:
            i = node.lineno - 1
            line = replace.get(i, lines[i])
            replace[i] = re.sub(rf"\b(def\s+){re.escape(node.name)}\b", r"\1_masked_", line, count=1)
    new_lines, new_no = [], {}
    for i, line in enumerate(lines):
        if i in drop:
            continue
        new_no[i + 1] = len(new_lines) + 1
        new_lines.append(replace.get(i, line))
    queries = []
    for name, defs in found.items():
        docs = [d for _, d in defs if d]
        if not docs:
            continue
        text = first_paragraph(docs[0])
        if len(text.split()) < 3:
            continue
        queries.append(Query(text, "", tuple(sorted(new_no[ln] for ln, _ in defs)), name))
    return "\n".join(new_lines), queries


def build_corpus(src_root: Path, out: Path, files: list[Path], mask: bool) -> list[Query]:
    queries: list[Query] = []
    for f in files:
        rel = f.relative_to(src_root).as_posix()
        try:
            source = f.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        done = strip_docstrings(source, mask)
        if done is None:
            continue
        text, qs = done
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, "utf-8")
        for q in qs:
            q.path = rel
            queries.append(q)
    return queries


# -- evaluation -----------------------------------------------------------------------------
def rank_of_hit(index: Index, q: Query, mode: str, k: int = 10) -> int | None:
    for r, h in enumerate(index.search(q.text, k=k, mode=mode), 1):
        c = h.chunk
        if c.path == q.path and any(c.start_line <= ln <= c.end_line for ln in q.lines):
            return r
    return None


def score(ranks: list[int | None]) -> dict[str, float]:
    n = max(1, len(ranks))
    return {
        "mrr10": sum(1.0 / r for r in ranks if r) / n,
        "r1": sum(1 for r in ranks if r == 1) / n,
        "r5": sum(1 for r in ranks if r and r <= 5) / n,
        "r10": sum(1 for r in ranks if r and r <= 10) / n,
    }


class CachedQueries:
    """Wrap an embedder so a query is encoded once across modes and sweeps."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim, self._memo = inner, inner.name, inner.dim, {}

    def encode(self, texts):
        return self.inner.encode(texts)

    def encode_query(self, text):
        if text not in self._memo:
            self._memo[text] = self.inner.encode_query(text)
        return self._memo[text]


def evaluate(index: Index, queries: list[Query], modes=MODES) -> dict[str, dict[str, float]]:
    indexed = {c.path for c in index.chunks}
    queries = [q for q in queries if q.path in indexed]
    return {m: score([rank_of_hit(index, q, m) for q in queries]) for m in modes}


def latency(index: Index, queries: list[Query], n: int = 500) -> tuple[float, float]:
    sample = random.Random(1).sample(queries, min(n, len(queries)))
    times = []
    for q in sample:
        t = time.perf_counter()
        index.search(q.text + " ", k=10)  # trailing space: not in the query-vector memo
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def timed_refresh(index: Index, root: Path, files: list[str], tag: str) -> float:
    for i, rel in enumerate(files):
        with open(root / rel, "a", encoding="utf-8") as fh:
            fh.write(f"\n\ndef _bench_edit_{tag}_{i}(value):\n    return value * {i} + 1\n")
    t = time.perf_counter()
    stats = index.refresh(root)
    elapsed = time.perf_counter() - t
    assert stats.files_changed == len(files), stats
    return elapsed


def sweep(index: Index, queries: list[Query]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    saved = (index.config.fusion, index.config.dense_weight)
    for fusion, weights in (("linear", (0.2, 0.3, 0.4, 0.5, 0.6)), ("rrf", (0.3, 0.5))):
        index.config.fusion = fusion
        for w in weights:
            index.config.dense_weight = w
            out[f"{fusion}@{w}"] = evaluate(index, queries, ("hybrid",))["hybrid"]
    index.config.fusion, index.config.dense_weight = saved
    return out


# -- commit message -> file -----------------------------------------------------------------
def commit_task(data: Path, config: IndexConfig, embedder, workdir: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for gz in sorted(data.glob("*.jsonl.gz")):
        rows = [json.loads(line) for line in gzip.open(gz, "rt", encoding="utf-8")]
        latest: dict[str, tuple[str, str]] = {}
        for r in rows:
            if r["path"] not in latest or r["date"] > latest[r["path"]][0]:
                latest[r["path"]] = (r["date"], r["before"])
        root = workdir / gz.name.split(".")[0]
        for path, (_, text) in latest.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, "utf-8")
        cfg = IndexConfig(**{**config.__dict__, "use_gitignore": False})
        index = Index(workdir / (root.name + ".index"), cfg, embedder)
        index.refresh(root)
        note(f"commits: {root.name}")
        per_mode = {}
        for mode in MODES:
            acc = {1: 0, 5: 0, 10: 0}
            for r in rows:
                ranked: list[str] = []
                for h in index.search(r["message"], k=200, mode=mode):
                    if h.chunk.path not in ranked:
                        ranked.append(h.chunk.path)
                for k in acc:
                    acc[k] += r["path"] in ranked[:k]
            per_mode[mode] = {f"acc@{k}": v / len(rows) for k, v in acc.items()}
        results[root.name] = {"files": len(latest), "commits": len(rows), **per_mode}
    return results


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path(sysconfig.get_paths()["stdlib"]),
                    help="source tree (default: this interpreter's standard library)")
    ap.add_argument("--commits", type=Path, default=None,
                    help="shared/data/commits directory for the commit -> file task")
    ap.add_argument("--embedder", default=None, help="static (default), minilm, or a model dir")
    ap.add_argument("--fusion", default=None, choices=("linear", "rrf"))
    ap.add_argument("--dense-weight", type=float, default=None)
    ap.add_argument("--limit", type=int, default=None, help="sample this many source files")
    ap.add_argument("--no-masked", action="store_true", help="skip the masked-name run")
    ap.add_argument("--no-refresh", action="store_true", help="skip the refresh timings")
    ap.add_argument("--sweep", action="store_true", help="print hybrid MRR@10 per fusion weight")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)

    base = IndexConfig()
    config = IndexConfig(**{**base.__dict__,
                            "embedder": args.embedder or base.embedder,
                            "fusion": args.fusion or base.fusion,
                            "dense_weight": base.dense_weight if args.dense_weight is None else args.dense_weight,
                            "use_gitignore": False})
    t = time.perf_counter()
    embedder = CachedQueries(load_embedder(config.embedder))
    load_s = time.perf_counter() - t
    work = args.workdir or Path(tempfile.mkdtemp(prefix="retrieval-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    files = source_files(args.corpus, args.limit)
    summary: dict = {"embedder": embedder.name, "embedder_spec": config.embedder,
                     "fusion": config.fusion, "dense_weight": config.dense_weight,
                     "embedder_load_s": round(load_s, 2), "corpus": str(args.corpus),
                     "source_files": len(files)}
    try:
        summary.update(run_named(args, config, embedder, files, work))
        if not args.no_masked:
            summary["masked"] = run_masked(args, config, embedder, files, work)
        if args.commits:
            summary["commits"] = commit_task(args.commits, config, embedder, work / "commits")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print_tables(summary)
    print(json.dumps(summary))
    return summary


def note(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_named(args, config: IndexConfig, embedder, files: list[Path], work: Path) -> dict:
    corpus = work / "named"
    queries = build_corpus(args.corpus, corpus, files, mask=False)
    index = Index(work / "named.index", config, embedder)
    t = time.perf_counter()
    stats = index.refresh(corpus)
    build_s = time.perf_counter() - t
    note(f"built {stats.chunks_total} chunks in {build_s:.1f} s; evaluating")
    res = evaluate(index, queries)
    out: dict = {
        "chunks": stats.chunks_total, "queries": sum(q.path in {c.path for c in index.chunks} for q in queries),
        "skipped": stats.skipped, "build_s": round(build_s, 2),
        "build_chunks_per_s": round(stats.chunks_total / build_s, 1),
        "mrr10": {m: round(res[m]["mrr10"], 4) for m in MODES},
        "recall_at_1": {m: round(res[m]["r1"], 4) for m in MODES},
        "recall_at_5": {m: round(res[m]["r5"], 4) for m in MODES},
        "recall_at_10": {m: round(res[m]["r10"], 4) for m in MODES},
    }
    p50, p95 = latency(index, queries)
    out["query_p50_ms"], out["query_p95_ms"] = round(p50, 2), round(p95, 2)
    if args.sweep:
        note("fusion sweep")
        out["sweep"] = {k: round(v["mrr10"], 4) for k, v in sweep(index, queries).items()}
    if not args.no_refresh:
        rels = sorted({c.path for c in index.chunks})
        rng = random.Random(2)
        out["refresh_1_file_s"] = round(timed_refresh(index, corpus, rng.sample(rels, 1), "a"), 3)
        out["refresh_50_files_s"] = round(timed_refresh(index, corpus, rng.sample(rels, min(50, len(rels))), "b"), 3)
    return out


def run_masked(args, config: IndexConfig, embedder, files: list[Path], work: Path) -> dict:
    corpus = work / "masked"
    queries = build_corpus(args.corpus, corpus, files, mask=True)
    index = Index(work / "masked.index", config, embedder)
    note("masked run")
    index.refresh(corpus)
    res = evaluate(index, queries)
    return {"mrr10": {m: round(res[m]["mrr10"], 4) for m in MODES},
            "recall_at_10": {m: round(res[m]["r10"], 4) for m in MODES}}


def print_tables(s: dict) -> None:
    print(f"\nembedder {s['embedder_spec']} ({s['embedder']}), fusion {s['fusion']} "
          f"w={s['dense_weight']}; {s['chunks']} chunks, {s['queries']} queries")
    print(f"{'retriever':<10} {'MRR@10':>7} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'masked MRR@10':>14}")
    for m in MODES:
        masked = s.get("masked", {}).get("mrr10", {}).get(m)
        print(f"{m:<10} {s['mrr10'][m]:>7.3f} {s['recall_at_1'][m]:>6.3f} {s['recall_at_5'][m]:>6.3f} "
              f"{s['recall_at_10'][m]:>6.3f} {masked if masked is not None else '-':>14}")
    print(f"build {s['build_chunks_per_s']} chunks/s ({s['build_s']} s); query p50 "
          f"{s['query_p50_ms']} ms, p95 {s['query_p95_ms']} ms; refresh 1 file "
          f"{s.get('refresh_1_file_s', '-')} s, 50 files {s.get('refresh_50_files_s', '-')} s")
    for k, v in s.get("sweep", {}).items():
        print(f"  sweep {k:<12} MRR@10 {v:.4f}")
    for project, r in s.get("commits", {}).items():
        row = "  ".join(f"{m} {r[m]['acc@1']:.2f}/{r[m]['acc@5']:.2f}/{r[m]['acc@10']:.2f}" for m in MODES)
        print(f"commits {project:<9} ({r['files']} files): acc@1/5/10  {row}")


if __name__ == "__main__":
    main()
