"""``benchmarks/reliability.py --quick``: every section of the reliability suite, small.

Two processes side by side (the durability section restarts its own server three times
while the other sections use theirs; most of either is waiting), each checked against the
suite's invariants: no 5xx and no hang under fuzzing or hostile input, every provider
fault survived, nothing acknowledged lost or stored twice across SIGKILLs, nothing written
outside the allowed roots. The full run is a benchmark (BENCHMARKS.md), not a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "reliability.py"


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(["nice", "-n", "10", sys.executable, str(SCRIPT), "--quick", *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _summary(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=540)
    lines = out.strip().splitlines()
    assert lines, f"no summary (exit {proc.returncode}):\n{err[-3000:]}"
    summary: dict[str, Any] = json.loads(lines[-1])
    if not summary["ok"]:
        detail = json.dumps(summary["detail"], indent=1)[-6000:]
        pytest.fail(f"invariants broken:\n{detail}\n{err[-2000:]}")
    assert proc.returncode == 0
    return summary


@pytest.mark.timeout(600)
def test_the_quick_suite_holds_every_invariant() -> None:
    durability = _start("--only", "durability")
    rest = _start("--only", "faults,fuzz,hostile,load")
    d, r = _summary(durability), _summary(rest)
    assert d["kills"] == 3 and d["acknowledged"] > 0
    assert d["acknowledged_lost"] == 0 and d["duplicated"] == 0
    assert r["faults_total"] >= 8 and r["faults_survived"] == r["faults_total"]
    assert r["fuzz_cases"] >= 100 and r["fuzz_5xx"] == 0 and r["fuzz_hangs"] == 0
    assert r["hostile_5xx"] == 0 and r["hostile_hangs"] == 0 and r["written_outside"] == 0
    levels = r["load"]["single"]
    assert set(levels) == {"c1", "c8"}
    for row in levels.values():
        assert row["throughput_rps"] > 0 and not row["errors"]
        assert all(e["ok"] > 0 for e in row["endpoints"].values())
