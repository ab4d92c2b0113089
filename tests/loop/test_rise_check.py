"""benchmarks/rise_check.py: issue 35's line 1 for any learner, its bandit in another file —
the rise over the frozen start against 2 × pooled SE, and the last version against the
bandit's of the same seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "rise_check.py"
EDITS = [str(i) for i in range(6)]


def _row(learner: str, seed: int, turn: int, per_edit_reward: float, se: float = 0.01) -> dict:
    per_edit = {e: [per_edit_reward * 10 + 0.1 * int(e), 10] for e in EDITS}  # 10 requests an edit
    total = sum(v[0] for v in per_edit.values()) / sum(v[1] for v in per_edit.values())
    return {"start": "shipped", "learner": learner, "seed": seed, "turn": turn, "reward": total, "se": se,
            "per_person": {"everyone": {"per_edit": per_edit}}}


def _write(tmp_path: Path, name: str, rows: list[dict]) -> str:
    f = tmp_path / f"{name}.json"
    f.write_text(json.dumps({"rows": rows}))
    return str(f)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _learner(rewards_last: list[float], turns: int = 6) -> list[dict]:
    return [_row("factored", s, t, 0.0 if t == 0 else last * t / turns)
            for s, last in enumerate(rewards_last) for t in range(turns + 1)]


def test_met_when_every_seed_rises_past_its_bar_and_ends_above_the_bandit(tmp_path: Path) -> None:
    run = _write(tmp_path, "run", _learner([0.10, 0.09, 0.08]))
    bandit = _write(tmp_path, "bandit", [_row("bandit", s, t, 0.05 * t / 6) for s in range(3) for t in range(7)])
    done = _run(run, "--bandit", bandit)
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict == {"line1_met": True, "bandit_found_for_every_seed": True}
    assert "| shipped/factored/seed2 | 6 |" in done.stdout and "**no**" not in done.stdout


def test_not_met_when_one_seed_ends_under_the_bandit(tmp_path: Path) -> None:
    run = _write(tmp_path, "run", _learner([0.10, 0.09, 0.04]))
    bandit = _write(tmp_path, "bandit", [_row("bandit", s, t, 0.05 * t / 6) for s in range(3) for t in range(7)])
    done = _run(run, "--bandit", bandit)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["line1_met"] is False
    assert done.stdout.count("**no**") == 1  # seed 2's "above the bandit"


def test_not_met_when_a_rise_is_inside_its_bar_or_the_turns_are_few(tmp_path: Path) -> None:
    bandit = _write(tmp_path, "bandit", [_row("bandit", s, t, -0.1) for s in range(3) for t in range(7)])
    wide = _write(tmp_path, "wide", [dict(r, se=0.05) for r in _learner([0.10, 0.09, 0.08])])  # bar 0.14
    done = _run(wide, "--bandit", bandit)
    assert json.loads(done.stdout.strip().splitlines()[-1])["line1_met"] is False
    few = _write(tmp_path, "few", _learner([0.10, 0.09, 0.08], turns=4))
    done = _run(few, "--bandit", bandit)
    assert json.loads(done.stdout.strip().splitlines()[-1])["line1_met"] is False


def test_the_gain_is_paired_by_edit_too(tmp_path: Path) -> None:
    from specialists.tab.loop.gate import paired_se

    rows = _learner([0.10, 0.09, 0.08])
    run = _write(tmp_path, "run", rows)
    done = _run(run)  # no bandit file: the bandit rows of the run itself (none here)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no bandit run for this seed" in done.stdout
    first, last = rows[0], rows[6]
    d, se, _, _ = paired_se([tuple(last["per_person"]["everyone"]["per_edit"][e]) for e in EDITS],
                            [tuple(first["per_person"]["everyone"]["per_edit"][e]) for e in EDITS])
    assert f"{d:+.4f} ({2 * se:.4f})" in done.stdout.splitlines()[2]


def test_bad_input_says_what_to_give(tmp_path: Path) -> None:
    done = _run(str(tmp_path / "missing.json"))
    assert done.returncode != 0 and "loop_learn.py --out" in done.stderr
    only_bandit = _write(tmp_path, "b", [_row("bandit", 0, 0, 0.0)])
    done = _run(only_bandit)
    assert done.returncode != 0 and "no learner's runs" in done.stderr
