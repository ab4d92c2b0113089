"""The tab suite's frontier route and the retrieval suite, on small synthetic data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from router.evals import run_suite
from router.evals.report import html_report, table
from tests.evals.test_edit_eval import rows


def write_data(tmp_path: Path) -> Path:
    data = tmp_path / "commits"
    data.mkdir()
    for project in ("alpha", "beta"):
        with gzip.open(data / f"{project}.jsonl.gz", "wt") as fh:
            for i, r in enumerate(rows(project, 6)):
                r["date"] = f"2020-01-0{i + 1}T00:00:00"
                fh.write(json.dumps(r) + "\n")
    return data


def test_tab_suite_frontier_route_is_priced_and_modelled(tmp_path: Path) -> None:
    suite = tmp_path / "tab.yaml"
    suite.write_text(f"kind: tab\ndata: {write_data(tmp_path)}\nprojects: [alpha]\n"
                     "per_project: 2\noptions: {model: gpt-5-mini, ttft_s: 0.5}\n")
    run = run_suite(suite, ["tab-frontier"])
    s = run["summary"]["routes"]["tab-frontier"]
    assert s["requests"] > 0 and s["keystrokes"] > 0 and s["mode"] == "replay"
    assert s["p99_ms"] >= 500, "modelled: at least the time to first token"
    assert s["cost_per_1000_keystrokes_usd"] > 0
    assert "MODELLED" in table(run)
    assert html_report(run).count("base64") == 3


def test_retrieval_suite_scores_each_mode(tmp_path: Path) -> None:
    suite = tmp_path / "retrieval.yaml"
    suite.write_text(f"kind: retrieval\ndata: {write_data(tmp_path)}\nper_project: 5\n"
                     "options: {embedder: 'hash:64'}\n")
    run = run_suite(suite, ["bm25", "hybrid"])
    routes = run["summary"]["routes"]
    assert set(routes) == {"bm25", "hybrid"} and run["n_tasks"] == 10
    for s in routes.values():
        assert 0.0 <= s["acc@1"] <= s["acc@10"] <= 1.0 and s["query_p50_ms"] > 0
