"""Issue 35's line 1 for one learner: does it rise from its start and end above the bandit?

    python benchmarks/rise_check.py runs/httpx_personal.json --bandit runs/httpx_bandit.json

Reads ``benchmarks/loop_learn.py`` outputs measured on the same project, population and
seeds: one with the learner (any: ``factored``, ``ppo``, ``ppo_q``...), one with
``--learner bandit`` run on the same events (or the learner and the bandit in one file, as
``loop_learn.py --learner ppo,bandit`` writes them). For each seed of each learner it prints
the issue's check: the last turn's reward per request over turn 0's (turn 0 is the frozen
start; every measurement meets the same people typing the same edits), with the bar
2 × pooled SE (the two versions' per-request SEs pooled, as ``loop_learn.py``'s ``rise``),
and the last version against the bandit's last version of the same seed, pooled and — where
both carry the reward per edit — paired by edit (``personal_compare.paired_by_edit``).
``loop_learn.py`` checks the same for the policy-gradient learners when the bandit is in the
same run; this reads any learner, across files. Prints a Markdown table and a JSON verdict:
met when every seed (at least 3) rises past its bar over at least 6 turns and ends above the
frozen start and above the bandit.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_learn import rise  # noqa: E402
from personal_compare import edits_of, paired_by_edit  # noqa: E402


def _load(path: str) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"rise_check: cannot read {path}: {e} (give a loop_learn.py --out file)")
    rows = data.get("rows") if isinstance(data, dict) else None
    if not rows:
        raise SystemExit(f"rise_check: {path} has no rows (is it a loop_learn.py --out file?)")
    return rows


def runs_of(rows: list[dict]) -> dict[tuple[str, str, int], list[dict]]:
    """(start, learner, seed) -> that run's versions by turn."""
    out: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        out.setdefault((r["start"], r["learner"], int(r["seed"])), []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r["turn"])
    return out


def _has_edits(row: dict) -> bool:
    people = row.get("per_person")
    return bool(people) and all("per_edit" in p for p in people.values())


def paired(a: dict, b: dict) -> tuple[float, float] | None:
    """``a`` minus ``b`` over everyone, paired by edit, with its SE (None if either lacks edits
    or they were not measured on the same edits)."""
    if not (_has_edits(a) and _has_edits(b)):
        return None
    ea, eb = edits_of(a), edits_of(b)
    if set(ea) != set(eb) or len(ea) < 2:
        return None
    return paired_by_edit(ea, eb)


def check(rows: list[dict], bandit_rows: list[dict], learner: str | None = None) -> dict:
    runs, bandits = runs_of(rows), runs_of(bandit_rows)
    per_seed: dict[str, dict] = {}
    for (start, lrn, seed), rs in sorted(runs.items()):
        if lrn == "bandit" or (learner and lrn != learner):
            continue
        first, last = rs[0], rs[-1]
        r = rise(first, last)  # loop_learn.py's own check of the rise
        fig: dict = {"start": start, "learner": lrn, "seed": seed, "turns": last["turn"] - first["turn"],
                     "first": r["first"], "last": r["last"], "gain": r["gain"],
                     "bar": round(2 * r["pooled_se"], 5), "rises": r["passes"],
                     "above_frozen": last["reward"] > first["reward"]}
        pr = paired(last, first)
        if pr:
            fig["paired_gain"], fig["paired_bar"] = round(pr[0], 5), round(2 * pr[1], 5)
        other = bandits.get((start, "bandit", seed))
        if other:
            b = other[-1]
            fig["bandit_last"] = b["reward"]
            fig["minus_bandit"] = round(last["reward"] - b["reward"], 5)
            fig["minus_bandit_pooled_se"] = round(math.sqrt(last["se"] ** 2 + b["se"] ** 2), 5)
            fig["above_bandit"] = last["reward"] > b["reward"]
            pb = paired(last, b)
            if pb:
                fig["minus_bandit_paired_se"] = round(pb[1], 5)
        per_seed[f"{start}/{lrn}/seed{seed}"] = fig
    if not per_seed:
        raise SystemExit("rise_check: no learner's runs in the first file"
                         + (f" named {learner!r}" if learner else "") + " (the bandit is the baseline, not the learner)")
    figs = list(per_seed.values())
    met = (len(figs) >= 3 and all(f["turns"] >= 6 and f["rises"] and f["above_frozen"] for f in figs)
           and all(f.get("above_bandit", False) for f in figs))
    return {"per_seed": per_seed, "line1_met": met,
            "bandit_found_for_every_seed": all("bandit_last" in f for f in figs)}


def table(result: dict) -> list[str]:
    lines = ["| run | turns | turn 0 → last | gain (2 × pooled SE) | paired gain (2 × paired SE) | rises | bandit, last | − bandit (pooled SE; paired SE) | above the bandit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, f in result["per_seed"].items():
        pg = f"{f['paired_gain']:+.4f} ({f['paired_bar']:.4f})" if "paired_gain" in f else "—"
        if "bandit_last" in f:
            ps = f"; {f['minus_bandit_paired_se']:.4f}" if "minus_bandit_paired_se" in f else ""
            vb = (f"{f['bandit_last']:+.4f}", f"{f['minus_bandit']:+.4f} ({f['minus_bandit_pooled_se']:.4f}{ps})",
                  "yes" if f["above_bandit"] else "**no**")
        else:
            vb = ("—", "—", "no bandit run for this seed")
        lines.append(f"| {name} | {f['turns']} | {f['first']:+.4f} → {f['last']:+.4f} | {f['gain']:+.4f} ({f['bar']:.4f}) | "
                     f"{pg} | {'yes' if f['rises'] else '**no**'} | {vb[0]} | {vb[1]} | {vb[2]} |")
    return lines


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: python benchmarks/rise_check.py runs/httpx_personal.json "
                                        "--bandit runs/httpx_bandit.json")
    ap.add_argument("run", help="loop_learn.py --out file with the learner's runs (from the start to check)")
    ap.add_argument("--bandit", action="append", default=[],
                    help="loop_learn.py --out file(s) with --learner bandit on the same project, population and "
                         "seeds (default: the bandit rows of RUN itself)")
    ap.add_argument("--learner", help="check only this learner of RUN (default: every learner but the bandit)")
    args = ap.parse_args(argv)
    rows = _load(args.run)
    bandit_rows = [r for path in args.bandit for r in _load(path)] or rows
    result = check(rows, bandit_rows, args.learner)
    print("\n".join(table(result)))
    print(json.dumps({"line1_met": result["line1_met"],
                      "bandit_found_for_every_seed": result["bandit_found_for_every_seed"]}))
    return result


if __name__ == "__main__":
    main()
