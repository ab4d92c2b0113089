"""Does personalisation serve each kind of person better than one global policy? (issue 35)

    python benchmarks/personal_compare.py benchmarks/out/mixed_personal.json \\
        benchmarks/out/mixed_global.json

Reads two ``benchmarks/loop_learn.py`` outputs measured on the same population, project and
people (a mixed population, ``--population configs/users/mixed.yaml``): one run with
``--personal`` (the policy reads the server's per-session history), one with
``--no-personal``. The *best single global policy* is the best version of the global run —
every turn of every seed, the frozen start included — by reward per request over everyone
(picked on the measured history itself: a choice that favours the global side). Each
personalised run's last version is set against it per kind of person (the population's
``type``): reward per request of that kind's requests, with its SE taking the *edit* as the
unit (one person types each edit), and the difference with the two SEs pooled. Where both
runs carry the reward per edit (``loop_learn.py`` from issue 35's paired comparison on),
the difference is also *paired by edit*: every measurement meets the same people typing the
same edits (``loop_learn.new_world``), so what an edit's difficulty adds to both sides
cancels (the loop gate's estimator, ``specialists.tab.loop.gate.paired_se``). Prints a
Markdown table and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from specialists.tab.loop.gate import paired_se  # noqa: E402


def versions(rows: list[dict]) -> list[dict]:
    return [r for r in rows if "per_person" in r]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("personal", help="loop_learn.py --personal output (JSON)")
    p.add_argument("global_", metavar="global", help="loop_learn.py --no-personal output (JSON)")
    args = p.parse_args(argv)
    pers, glob = (json.loads(Path(f).read_text()) for f in (args.personal, args.global_))
    for name, run in (("personal", pers), ("global", glob)):
        if not versions(run["rows"]):
            raise SystemExit(f"{name}: no per-person figures (run loop_learn.py with --population)")
    same = ("population", "project", "people", "reward", "ask_after_edit", "measure_pairs")
    diff = [k for k in same if pers["args"].get(k) != glob["args"].get(k)]
    if diff:
        raise SystemExit(f"the two runs differ in {', '.join(diff)}: compare runs of the same world")
    best = max(versions(glob["rows"]), key=lambda r: r["reward"])
    lasts: dict[int, dict] = {}
    for r in versions(pers["rows"]):
        if r["turn"] >= lasts.get(r["seed"], {"turn": -1})["turn"]:
            lasts[r["seed"]] = r
    kinds = sorted(best["per_person"])
    lines = ["| policy | everyone: reward / request (± SE) | chars kept / 1,000 | "
             + " | ".join(f"{k}: reward / request (± edit SE)" for k in kinds) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in kinds) + " |"]

    def line(label: str, r: dict) -> str:
        cells = " | ".join(f"{r['per_person'][k]['reward']:+.4f} (± {r['per_person'][k]['edit_se']:.4f})"
                           for k in kinds)
        return (f"| {label} | {r['reward']:+.4f} (± {r['se']:.4f}) | {r.get('kept_per_1000', float('nan')):.1f} "
                f"| {cells} |")

    start = next(r for r in versions(glob["rows"]) if r["turn"] == 0)
    lines.append(line("frozen shipped checkpoint (turn 0)", start))
    lines.append(line(f"best global: seed {best['seed']}, turn {best['turn']}", best))
    out: dict = {"best_global": {"seed": best["seed"], "turn": best["turn"], "reward": best["reward"],
                                 "per_person": best["per_person"]}, "personal": {}}
    for seed, r in sorted(lasts.items()):
        lines.append(line(f"personalised: seed {seed}, turn {r['turn']}", r))
        per = {}
        for k in kinds:
            a, b = r["per_person"][k], best["per_person"][k]
            d = a["reward"] - b["reward"]
            se = math.sqrt(a["edit_se"] ** 2 + b["edit_se"] ** 2)
            per[k] = {"personal": a["reward"], "global": b["reward"], "diff": round(d, 5),
                      "se": round(se, 5), "better": d > 0, "better_by_2se": d > 2 * se}
            if "per_edit" in a and "per_edit" in b:
                if set(a["per_edit"]) != set(b["per_edit"]):
                    raise SystemExit(f"{k}: the two runs measured different edits: compare runs of the same world")
                units = sorted(a["per_edit"], key=int)
                pd, pse, _, _ = paired_se([tuple(a["per_edit"][u]) for u in units],
                                          [tuple(b["per_edit"][u]) for u in units])
                per[k].update({"paired_diff": round(pd, 5), "paired_se": round(pse, 5),
                               "better_by_2_paired_se": pd > 2 * pse})
        out["personal"][f"seed{seed}"] = per
    lines.append("")
    lines.append("| seed | " + " | ".join(f"{k}: personalised − best global (2 × SE)" for k in kinds) + " |")
    lines.append("| --- | " + " | ".join("---" for _ in kinds) + " |")
    for seed, per in out["personal"].items():
        lines.append(f"| {seed} | " + " | ".join(f"{per[k]['diff']:+.4f} ({2 * per[k]['se']:.4f})" for k in kinds)
                     + " |")
    paired = all("paired_se" in v for per in out["personal"].values() for v in per.values())
    if paired:
        lines.append("")
        lines.append("| seed | " + " | ".join(f"{k}: paired by edit (2 × paired SE)" for k in kinds) + " |")
        lines.append("| --- | " + " | ".join("---" for _ in kinds) + " |")
        for seed, per in out["personal"].items():
            lines.append(f"| {seed} | " + " | ".join(
                f"{per[k]['paired_diff']:+.4f} ({2 * per[k]['paired_se']:.4f})" for k in kinds) + " |")
        out["every_kind_better_by_2_paired_se_every_seed"] = all(
            v["better_by_2_paired_se"] for per in out["personal"].values() for v in per.values())
    out["every_kind_better_every_seed"] = all(v["better"] for per in out["personal"].values() for v in per.values())
    out["every_kind_better_by_2se_every_seed"] = all(v["better_by_2se"] for per in out["personal"].values()
                                                     for v in per.values())
    print("\n".join(lines))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
