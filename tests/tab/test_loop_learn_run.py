"""benchmarks/loop_learn.py run as a script on a toy history (issue 35's readings): reward per
request asked beside reward per request, Tab-off requests per kind, the per-kind reference
told who types, and every version measured on several draws of people."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_a_mixed_population_run_reports_every_reading(toy_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loop_learn.py"), str(toy_data), "--project", "toy",
         "--seeds", "0", "--turns", "1", "--events-per-turn", "30", "--start", "shipped", "--learner", "ppo",
         "--epochs", "1", "--reward", "kept", "--ask-after-edit", "--population",
         str(ROOT / "configs" / "users" / "mixed.yaml"), "--people", "4", "--personal", "--measure-worlds", "2",
         "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--curve", str(tmp_path / "c.png")],
        cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(out.read_text())
    measured = run["setup"]["measure_pairs"]
    assert run["rows"][0]["tab_off"] > 0 and set(run["rows"][0]["per_person"]) == {"impatient", "taker"}
    for row in run["rows"]:
        # per request asked: the same reward summed, over the requests made and those not made
        total = row["reward"] * row["requests"]
        assert row["reward_per_ask"] * (row["requests"] + row["tab_off"]) == pytest.approx(total, abs=1e-3)
        kinds = row["per_person"]
        assert sum(k["tab_off"] for k in kinds.values()) == row["tab_off"]
        assert kinds.get("taker", {}).get("tab_off", 0) == 0  # takers never switch Tab off
        # two draws of people: units run past the edits of one
        units = {int(u) for k in kinds.values() for u in k["per_edit"]}
        assert max(units) >= measured and max(units) < 2 * measured
    rise = next(iter(run["rise"].values()))
    assert {"gain_per_ask", "pooled_se_per_ask", "passes_per_ask"} <= set(rise)
    ref = run["setup"]["reference"]
    for kind in ("impatient", "taker"):
        silenced = ref[f"shipped_but_never_show_{kind}"]["per_person"][kind]
        # shown nothing: no reward, no dismissals, never switched off
        assert silenced["reward"] == 0 and silenced["show_rate"] == 0 and silenced["tab_off"] == 0


def _run(toy_data: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loop_learn.py"), str(toy_data), "--project", "toy",
         "--seeds", "0", "--start", "shipped", "--epochs", "1", "--events-per-turn", "30", "--reward", "kept",
         "--population", str(ROOT / "configs" / "users" / "mixed.yaml"), "--people", "4",
         "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run.json"),
         "--curve", str(tmp_path / "c.png"), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=540)


@pytest.mark.timeout(600)
def test_the_offline_gate_judges_every_update_on_edits_kept_out_of_collection(toy_data: Path,
                                                                                tmp_path: Path) -> None:
    done = _run(toy_data, tmp_path, "--turns", "2", "--learner", "ppo", "--gate-edits", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["setup"]["gate_pairs"] == 1 and run["setup"]["collect_pairs"] == 3  # 6 pairs: 4 earlier
    for row in run["rows"][:-1]:  # every update judged: paired difference, its interval, the verdict
        gate = row["gate"]
        assert gate["ci"][0] <= gate["difference"] <= gate["ci"][1]
        assert gate["passed"] == (gate["ci"][0] >= -0.005)  # the product gates' rule (gate.verdict)
    assert "gate" not in run["rows"][-1]  # the last measurement trains nothing


def test_a_gate_larger_than_the_earlier_history_is_refused(toy_data: Path, tmp_path: Path) -> None:
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo", "--gate-edits", "4")
    assert done.returncode != 0 and "--gate-edits 4" in done.stderr
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo", "--gate-edits", "1", "--lm", "pg")
    assert done.returncode == 2 and "--gate-edits" in done.stderr


@pytest.mark.timeout(600)
def test_exploring_collection_runs_and_a_share_out_of_range_is_refused(toy_data: Path, tmp_path: Path) -> None:
    """``--explore ε`` (issue 35's line-2 try): the collected draws mix in uniform ones —
    with ε = 1 every draw is uniform, so far more is shown while collecting than by the
    policy alone; measuring stays greedy, the same at turn 0 either way."""
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo", "--explore", "1.0")
    assert done.returncode == 0, done.stderr[-3000:]
    explored = json.loads((tmp_path / "run.json").read_text())["rows"][0]
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo")
    assert done.returncode == 0, done.stderr[-3000:]
    plain = json.loads((tmp_path / "run.json").read_text())["rows"][0]
    assert explored["reward"] == plain["reward"] and explored["show_rate"] == plain["show_rate"]
    assert explored["collect_show"] > plain["collect_show"]
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo", "--explore", "1.5")
    assert done.returncode == 2 and "--explore 1.5" in done.stderr
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "factored", "--calibrate", "1.5")
    assert done.returncode == 2 and "--calibrate 1.5" in done.stderr
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "ppo", "--dismissals")
    assert done.returncode == 2 and "add factored to --learner" in done.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("shape", [["--taste-prior", "1"], ["--taste", "mixture", "--right-model", "net"],
                                   ["--taste", "mixture", "--dismissals", "--hits", "--calibrate", "0.2"]])
def test_the_factored_learner_learns_rightness_from_every_cut_and_tastes_per_session(
        toy_data: Path, tmp_path: Path, shape: list[str]) -> None:
    """``--learner factored`` (issue 35, line 2): every collected request labels each of its cuts
    (typed next or not), so the rightness model learns from more rows than events; the shown
    right cuts feed the taken shares; the policy itself is not updated. With bands, or with
    kinds of taste and a network for rightness; or with what a session dismissed, how its
    recent cuts fared, and a calibration of P(right)."""
    done = _run(toy_data, tmp_path, "--turns", "2", "--learner", "factored", "--personal", "--ask-after-edit",
                *shape)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "run.json").read_text())
    first, second = run["rows"][0], run["rows"][1]
    assert first["right_rows"] > 30 and second["right_rows"] > first["right_rows"]  # more rows than events
    assert 0 < first["right_share"] < 1
    assert second["taken_rows"] >= first["taken_rows"]
    assert all(0 < first[f"taken_band{b}"] < 1 for b in range(4))
    assert len(run["rows"]) == 3 and first["taste_kinds"] >= 1
    if "--dismissals" in shape:
        assert run["args"]["dismissals"] and run["args"]["hits"] and run["args"]["calibrate"] == 0.2
    elif "mixture" in shape:
        assert run["args"]["taste"] == "mixture" and run["args"]["right_model"] == "net"
    else:
        assert run["args"]["taste_prior"] == 1.0 and first["taste_kinds"] == 1  # bands: no kinds


@pytest.mark.timeout(600)
def test_long_cuts_reports_what_one_kind_would_take(toy_data: Path, tmp_path: Path) -> None:
    """benchmarks/long_cuts.py (told who types): per rule, that kind's shown and accepted cuts
    and its reward per request; everyone else is shown nothing. An unknown kind is refused."""
    script = ROOT / "benchmarks" / "long_cuts.py"
    base = [sys.executable, str(script), str(toy_data), "--project", "toy", "--population",
            str(ROOT / "configs" / "users" / "mixed-length.yaml"), "--cache-dir", str(tmp_path / "cache"),
            "--collect-share", "0.5"]
    done = subprocess.run(base + ["--kind", "liner", "--min-chars", "5", "--margins", "none,0",
                                  "--thresholds", "0.0,1.0", "--saved", "0,1e9", "--measure-worlds", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    model = next(line for line in lines if line.startswith("rightness model:"))
    fitted, right = (int(n) for n in re.search(r"on (\d+) candidates .*?, (\d+) right", model).groups())
    assert 0 < right < fitted
    rows = [dict(part.split(" ", 1) for part in line.split(" | ")) for line in lines if line.startswith("rule ")]
    assert [r["rule"] for r in rows] == ["longest", "favourite", "favourite", "rightness", "rightness",
                                         "saved", "saved"]
    # a bar always reached shows wherever the longest rule does; one never reached, nothing
    for always in (rows[3], rows[5]):
        if int(always["accepted"]) == int(rows[0]["accepted"]) == 0:  # the same requests met
            assert always["shown"] == rows[0]["shown"]
    assert int(rows[4]["shown"]) == 0 and float(rows[4]["reward_per_request"]) == 0.0
    assert int(rows[6]["shown"]) == 0
    for r in rows:
        shown, accepted = int(r["shown"]), int(r["accepted"])
        assert 0 <= accepted <= shown <= int(r["requests"])
        assert float(r["precision"]) == pytest.approx(accepted / max(1, shown), abs=1e-4)
    assert int(rows[0]["shown"]) > 0  # the toy edits have cuts of five characters and more
    # shown wherever a long enough cut exists, with no accept to change what is typed next:
    # the longest and the always-favourite rules meet the same requests; a margin shows fewer
    if int(rows[0]["accepted"]) == int(rows[1]["accepted"]) == 0:
        assert rows[0]["shown"] == rows[1]["shown"] and rows[0]["requests"] == rows[1]["requests"]
    assert int(rows[2]["shown"]) < int(rows[1]["shown"])
    done = subprocess.run(base + ["--kind", "nobody"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "--kind 'nobody'" in done.stderr and "brief, liner" in done.stderr


@pytest.mark.timeout(600)
def test_serve_also_measures_one_version_other_ways_and_leaves_the_run_as_it_was(toy_data: Path,
                                                                                 tmp_path: Path) -> None:
    """``--serve-also`` (issue 35, line 2): the last personal factored version is measured also
    globally, as each kind of taste for everyone and told who types, to the same people; the
    run's own rows are those of the same run without it (its learner's random stream set aside)."""
    shape = ["--turns", "2", "--learner", "factored", "--personal", "--ask-after-edit", "--taste", "mixture",
             "--measure-worlds", "2"]
    done = _run(toy_data, tmp_path, *shape)
    assert done.returncode == 0, done.stderr[-3000:]
    plain = json.loads((tmp_path / "run.json").read_text())["rows"]
    done = _run(toy_data, tmp_path, *shape, "--serve-also")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "run.json").read_text())["rows"]
    keep = ("reward", "show_rate", "accept_rate", "right_rows", "taken_rows", "collect_reward")
    assert [[r.get(k) for k in keep] for r in rows] == [[r.get(k) for k in keep] for r in plain]
    assert all("serving" not in row for row in rows[:-1])  # the last version, the one compared
    for row in rows[-1:]:
        serving = row["serving"]
        kinds = [m for m in serving if m.startswith("as_kind")]
        assert {"global", "told"} <= set(serving) and kinds == [f"as_kind{k}" for k in range(len(kinds))]
        for figures in serving.values():
            assert set(figures) >= {"everyone", "impatient", "taker"}
            units = sum(p["requests"] for k, p in figures.items() if k != "everyone")
            assert units > 0 and all("per_edit" in p for k, p in figures.items() if k != "everyone")
    done = _run(toy_data, tmp_path, "--turns", "1", "--learner", "factored", "--serve-also")
    assert done.returncode == 2 and "--serve-also" in done.stderr and "--personal" in done.stderr
