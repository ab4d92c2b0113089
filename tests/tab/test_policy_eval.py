"""benchmarks/tab_policy_eval.py scores a saved checkpoint the way the trainer scored it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path


def _script():
    path = Path(__file__).parents[2] / "benchmarks" / "tab_policy_eval.py"
    spec = importlib.util.spec_from_file_location("tab_policy_eval", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_reproduces_the_trainers_dev_score(tiny_checkpoint, toy_data, capsys) -> None:
    saved = json.loads((tiny_checkpoint / "policy.json").read_text())
    assert saved["train_args"]["context_tokens"] == 48  # read from the policy, not a flag
    assert _script().main([str(toy_data), "--checkpoint", str(tiny_checkpoint), "--split", "toy",
                           "--per-project", "0", "--cache-dir", ""]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["policy_version"] == saved["version"]
    assert row["requests"] == saved["dev"]["requests"] > 0
    assert row["reward_per_request"] == saved["dev"]["reward_per_request"]
