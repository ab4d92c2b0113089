"""benchmarks/tab_policy_eval.py scores a saved checkpoint the way the trainer scored it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tab_policy_eval.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The benchmark as it is run, a script of its own (tests import no benchmark)."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600)


def test_it_reproduces_the_trainers_dev_score(tiny_checkpoint, toy_data) -> None:
    saved = json.loads((tiny_checkpoint / "policy.json").read_text())
    assert saved["train_args"]["context_tokens"] == 48  # read from the policy, not a flag
    done = _run(str(toy_data), "--checkpoint", str(tiny_checkpoint), "--split", "toy",
                "--per-project", "0", "--cache-dir", "")
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["policy_version"] == saved["version"]
    assert row["requests"] == saved["dev"]["requests"] > 0
    assert row["reward_per_request"] == saved["dev"]["reward_per_request"]
