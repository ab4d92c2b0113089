"""Route comparison on real commits (issue 7): train the learned route on some projects,
then compare every route on held-out projects. Replay mode unless the eval config names
real providers. Prints the tables, then a JSON summary as the last line.

    nice python benchmarks/eval_edit.py            # about 3 minutes on 2 CPU cores
    nice python benchmarks/eval_edit.py --per-project 10   # a quick look
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from router.cli import main as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-project", type=int, help="tasks per project (default: the suites')")
    p.add_argument("--out", default=str(ROOT / "runs" / "eval"))
    p.add_argument("--config", default=str(ROOT / "configs" / "eval" / "routes.yaml"))
    p.add_argument("--classifier", default=str(ROOT / "configs" / "eval" / "router-classifier.json"))
    p.add_argument("--target-cost-share", default="0.5")
    return p.parse_args()


def main() -> int:
    a = _args()
    limit = ["--limit", str(a.per_project)] if a.per_project else []
    common = ["--config", a.config, "--out", a.out, *limit]
    fixed = "whole-file,search-replace,sketch-apply,cascade"
    steps = [
        ["eval", str(ROOT / "configs/eval/edit-train.yaml"), "--routes", fixed, *common],
        ["router", "train", str(Path(a.out) / "edit-train.json"), "--cheap", "cascade",
         "--strong", "whole-file", "--target-cost-share", a.target_cost_share,
         "--out", a.classifier],
        ["eval", str(ROOT / "configs/eval/edit.yaml"), "--routes", fixed + ",learned", *common],
    ]
    for argv in steps:
        print("$ complement " + " ".join(argv), flush=True)
        rc = cli(argv)
        if rc:
            return rc
    run = json.loads((Path(a.out) / "edit.json").read_text())
    print(json.dumps({"suite": run["suite"], "n_tasks": run["n_tasks"],
                      "routes": run["summary"]["routes"],
                      "files_over_300_lines": run["summary"]["files_over_300_lines"],
                      "vs_baseline": run["summary"]["vs_baseline"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
