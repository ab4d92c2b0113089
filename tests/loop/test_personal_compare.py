"""benchmarks/personal_compare.py: the cross-fitted comparison removes the winner's curse of
a best global version picked on the very edits it is judged on (issue 35, line 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "personal_compare.py"
ARGS = {"population": "configs/users/mixed.yaml", "project": "httpx", "people": 16, "reward": "kept",
        "ask_after_edit": True, "measure_pairs": 0}
KINDS = {"a": ["0", "1", "2", "3"], "b": ["4", "5", "6", "7"]}


def _row(seed: int, turn: int, per_edit: dict[str, list[float]]) -> dict:
    per_person = {}
    for kind, edits in KINDS.items():
        r = sum(per_edit[e][0] for e in edits)
        n = sum(per_edit[e][1] for e in edits)
        per_person[kind] = {"reward": r / n, "edit_se": 0.01, "per_edit": {e: per_edit[e] for e in edits}}
    total = sum(v[0] for v in per_edit.values()) / sum(v[1] for v in per_edit.values())
    return {"seed": seed, "turn": turn, "reward": total, "se": 0.01, "kept_per_1000": 0.0,
            "per_person": per_person}


def _run(tmp_path: Path, personal: list[dict], global_: list[dict], *extra: str) -> subprocess.CompletedProcess[str]:
    files = []
    for name, rows in (("personal", personal), ("global", global_)):
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps({"args": ARGS, "rows": rows}))
        files.append(str(f))
    return subprocess.run([sys.executable, str(SCRIPT), *files, *extra], capture_output=True, text=True,
                          timeout=120)


def test_a_version_lucky_on_one_edit_is_judged_without_that_edit(tmp_path: Path) -> None:
    # global version i is lucky on edit i alone (10 over its 10 requests), 0 elsewhere; the
    # personalised policy earns 0 on every edit. In hindsight the best global version wins
    # its lucky edit's kind; judged on edits it was not chosen on, it earns what the other does.
    edits = [str(i) for i in range(8)]
    global_ = [_row(0, i, {e: [10.0 if e == str(i) else 0.0, 10] for e in edits}) for i in range(8)]
    personal = [_row(0, 8, {e: [0.0, 10] for e in edits})]
    done = _run(tmp_path, personal, global_, "--splits", "5")
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    hindsight = out["personal"]["seed0"]
    assert hindsight["a"]["paired_diff"] == -0.25  # 10 of 40 requests' worth, lost to luck
    assert hindsight["b"]["paired_diff"] == 0.0
    cross = out["cross_fitted"]["seed0"]
    assert cross["a"]["diff"] == 0.0 and cross["b"]["diff"] == 0.0
    assert out["cross_fitted_every_kind_better_every_seed"] is False
    assert "other half of the edits" in done.stdout


def test_a_real_difference_survives_cross_fitting(tmp_path: Path) -> None:
    edits = [str(i) for i in range(8)]
    global_ = [_row(0, t, {e: [1.0 + (0.5 if int(e) % 2 else 0.0), 10] for e in edits}) for t in range(3)]
    personal = [_row(s, 3, {e: [3.0 + (0.5 if int(e) % 2 else 0.0) + 0.1 * int(e), 10] for e in edits})
                for s in (0, 1)]
    done = _run(tmp_path, personal, global_)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for seed in ("seed0", "seed1"):
        for kind in KINDS:
            c = out["cross_fitted"][seed][kind]
            assert c["diff"] > 0.2 and c["better_by_2_paired_se"]
    assert out["cross_fitted_every_kind_better_by_2_paired_se_every_seed"] is True


def test_splits_must_not_be_negative(tmp_path: Path) -> None:
    done = _run(tmp_path, [], [], "--splits", "-1")
    assert done.returncode == 2 and "--splits" in done.stderr


def test_runs_measured_on_different_draws_of_people_are_refused(tmp_path: Path) -> None:
    edits = [str(i) for i in range(8)]
    rows = [_row(0, 0, {e: [1.0, 10] for e in edits})]
    files = []
    for name, worlds in (("personal", 4), ("global", None)):  # a run from before the option: 1
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps({"args": {**ARGS, **({"measure_worlds": worlds} if worlds else {})}, "rows": rows}))
        files.append(str(f))
    done = subprocess.run([sys.executable, str(SCRIPT), *files], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "measure_worlds" in done.stderr
    same = tmp_path / "global1.json"
    same.write_text(json.dumps({"args": {**ARGS, "measure_worlds": 1}, "rows": rows}))
    done = subprocess.run([sys.executable, str(SCRIPT), files[1], str(same)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_with_several_global_runs_the_best_is_the_best_of_all_of_them(tmp_path: Path) -> None:
    edits = [str(i) for i in range(8)]
    personal = [_row(0, 4, {e: [2.0, 10] for e in edits})]
    files = [tmp_path / "personal.json"]
    files[0].write_text(json.dumps({"args": ARGS, "rows": personal}))
    for name, value in (("ppo", 1.0), ("factored", 3.0)):  # the second learner's global version is better
        rows = [{**_row(0, t, {e: [value if t else 0.0, 10] for e in edits}), "learner": name} for t in range(2)]
        f = tmp_path / f"global_{name}.json"
        f.write_text(json.dumps({"args": ARGS, "rows": rows}))
        files.append(f)
    done = subprocess.run([sys.executable, str(SCRIPT), *map(str, files), "--splits", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["best_global"]["learner"] == "factored" and out["best_global"]["reward"] == 0.3
    assert out["personal"]["seed0"]["a"]["diff"] == -0.1
    bad = tmp_path / "other_world.json"
    bad.write_text(json.dumps({"args": {**ARGS, "project": "attrs"}, "rows": personal}))
    done = subprocess.run([sys.executable, str(SCRIPT), *map(str, files), str(bad)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "other_world.json" in done.stderr and "project" in done.stderr


def _serving(per_edit: dict[str, list[float]]) -> dict:
    row = _row(0, 0, per_edit)
    return {"everyone": row["reward"], **row["per_person"]}


def test_a_personal_versions_own_global_servings_are_candidates_and_told_is_not(tmp_path: Path) -> None:
    # loop_learn.py --serve-also: the personal version served as kind a for everyone earns 2.5
    # a request on a's edits and nothing on b's; told who types, 3 everywhere (no global policy)
    edits = [str(i) for i in range(8)]
    personal = _row(0, 4, {e: [20.0, 10] for e in edits})
    personal["serving"] = {"global": _serving({e: [5.0, 10] for e in edits}),
                           "as_kind0": _serving({e: [25.0 if e in KINDS["a"] else 0.0, 10] for e in edits}),
                           "told": _serving({e: [30.0, 10] for e in edits})}
    global_ = [_row(0, t, {e: [10.0 * t, 10] for e in edits}) for t in range(2)]  # its best: 1.0 everywhere
    done = _run(tmp_path, [personal], global_, "--splits", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["best_global"]["learner"].endswith("served as_kind0") and out["best_global"]["reward"] == 1.25
    per = out["personal"]["seed0"]
    assert per["a"]["paired_diff"] == -0.5 and per["b"]["paired_diff"] == 2.0
    assert "| 0 | told | +3.0000 |" in done.stdout and "| 0 | as_kind0 |" in done.stdout
