"""benchmarks/loop_learn.py refuses an unknown learner or start before any work, naming what it takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "loop_learn.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_an_unknown_learner_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    done = _run(str(tmp_path), "--project", "httpx", "--learner", "ppo,ppoq", "--out", str(tmp_path / "o.json"))
    assert done.returncode == 2
    assert "ppoq" in done.stderr and "ppo_q" in done.stderr and "bandit" in done.stderr
    assert not (tmp_path / "o.json").exists()


def test_an_unknown_start_is_refused(tmp_path: Path) -> None:
    done = _run(str(tmp_path), "--project", "httpx", "--start", "checkpoint")
    assert done.returncode == 2 and "checkpoint" in done.stderr and "always_show" in done.stderr


def test_help_names_every_learner() -> None:
    done = _run("--help")
    assert done.returncode == 0
    for name in ("ppo_stale", "ppo_q", "bandit", "always_show"):
        assert name in done.stdout
