"""`complement eval` on the edit suite in replay mode, reports, compare, and router train."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from router.cli import main
from router.evals import run_suite
from router.evals.compare import compare, compare_text
from router.evals.report import html_report, table
from router.evals.scoring import changed_lines_right, exact_ws

FUNCS = 40  # functions per synthetic file: files of ~160 lines, a few over 300


def synthetic_file(n: int) -> str:
    return "".join(f"def f{i}(x):\n    y = x * {i}\n    return y + {i}\n\n" for i in range(n))


def rows(project: str, count: int) -> list[dict]:
    out = []
    for k in range(count):
        before = synthetic_file(FUNCS + 50 * (k % 3 == 0))
        target = (7 * k) % FUNCS
        after = before.replace(f"    y = x * {target}\n", f"    y = x * {target} - 1\n"
                               f"    log(y)\n")
        out.append({"repo": project, "commit": f"{k:040d}", "parent": "0" * 40,
                    "message": f"fix f{target} off by one", "path": f"pkg/m{k}.py",
                    "language": "python", "hunks": 1, "before": before, "after": after})
    return out


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    data = tmp_path / "commits"
    data.mkdir()
    for project in ("alpha", "beta"):
        with gzip.open(data / f"{project}.jsonl.gz", "wt") as fh:
            for r in rows(project, 8):
                fh.write(json.dumps(r) + "\n")
    suite = tmp_path / "edit.yaml"
    suite.write_text(f"kind: edit\ndata: {data}\nprojects: [alpha, beta]\nper_project: 6\n"
                     "baseline: whole-file\n")
    cfg = tmp_path / "routes.yaml"
    cfg.write_text(f"""
models:
  sonnet: {{model: replay/claude-sonnet-4-5, latency: {{ttft_s: 1.0, tokens_per_s: 50}}}}
routes:
  whole-file: {{strategy: whole_file, targets: [sonnet]}}
  search-replace: {{strategy: search_replace, targets: [sonnet]}}
  sketch-apply: {{strategy: sketch, targets: [sonnet]}}
  cascade: {{strategy: cascade, targets: [sonnet]}}
  learned: {{policy: learned, classifier: {tmp_path / 'clf.json'}, cheap: cascade, strong: whole-file}}
""")
    return {"suite": suite, "config": cfg, "out": tmp_path / "out", "clf": tmp_path / "clf.json"}


def test_edit_suite_replay_summary(setup: dict[str, Path]) -> None:
    run = run_suite(setup["suite"], None, setup["config"])
    routes = run["summary"]["routes"]
    assert list(routes) == ["whole-file", "search-replace", "sketch-apply", "cascade"], \
        "learned is left out while its classifier does not exist"
    for name, s in routes.items():
        assert {"exact", "output_tokens", "cost_usd", "latency_p50_s", "mode"} <= set(s)
        assert s["mode"] == "replay" and s["n"] == 12
    assert routes["whole-file"]["exact"] == 1.0
    assert routes["sketch-apply"]["output_tokens"] < routes["whole-file"]["output_tokens"] / 3
    assert routes["cascade"]["exact"] >= routes["sketch-apply"]["exact"]
    vs = run["summary"]["vs_baseline"]["sketch-apply"]
    assert vs["cost_ratio"] < 1 and vs["latency_p50_ratio"] < 1
    task = run["tasks"][0]
    assert task["trace"] and task["features"] and task["frontier_latency_s"] > 0
    text = table(run)
    assert "MODELLED" in text and "whole-file" in text
    page = html_report(run)
    assert page.count("data:image/png;base64,") == 4 and "MODELLED" in page


def test_cli_eval_writes_reports_and_compare_and_train(setup: dict[str, Path],
                                                       capsys: pytest.CaptureFixture) -> None:
    out = setup["out"]
    argv = ["eval", str(setup["suite"]), "--config", str(setup["config"]), "--out", str(out)]
    assert main(argv + ["--routes", "whole-file,cascade"]) == 0
    first = out / "edit.json"
    assert first.exists() and (out / "edit.html").exists()
    printed = capsys.readouterr().out
    assert "cascade" in printed and "JSON:" in printed
    run1 = json.loads(first.read_text())
    assert set(run1["summary"]["routes"]) == {"whole-file", "cascade"}

    assert main(["router", "train", str(first), "--cheap", "cascade", "--strong", "whole-file",
                 "--out", str(setup["clf"])]) == 0
    clf = json.loads(setup["clf"].read_text())
    assert clf["meta"]["tasks"] == 12 and 0.0 <= clf["threshold"] <= 1.0 + 1e-6

    saved = out / "run1.json"
    first.rename(saved)
    assert main(argv + ["--routes", "whole-file,cascade,learned"]) == 0
    run2 = json.loads(first.read_text())
    learned = [t for t in run2["tasks"] if t["route"] == "learned"]
    assert learned and all(t["learned"]["chose"] in ("cascade", "whole-file") for t in learned)
    capsys.readouterr()
    assert main(["eval", "compare", str(saved), str(first)]) == 0
    diff_text = capsys.readouterr().out
    assert "learned: only in run2" in diff_text


def test_compare_names_flipped_tasks() -> None:
    def run(exact: bool) -> dict:
        return {"summary": {"routes": {"r": {"exact": 1.0 if exact else 0.0, "mode": "replay"}}},
                "tasks": [{"route": "r", "task": "t1", "exact": exact}]}

    diff = compare(run(True), run(False))
    assert diff["flipped"] == {"r": {"fixed": [], "broken": ["t1"]}}
    assert diff["routes"]["r"]["exact"]["delta"] == -1.0
    assert "1 tasks broken: t1" in compare_text(diff)


def test_scoring() -> None:
    before, after = "a\nb\nc\n", "a\nB\nc\n"
    assert changed_lines_right(before, after, after) == 1.0
    assert changed_lines_right(before, after, before) == 0.0
    assert changed_lines_right(before, after, "a\nB\nc\nextra\n") == pytest.approx(2 / 3)
    assert exact_ws("x = 1  \n\n\n\ny\n", "x = 1\n\ny")
