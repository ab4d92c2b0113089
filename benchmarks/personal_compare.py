"""Does personalisation serve each kind of person better than one global policy? (issue 35)

    python benchmarks/personal_compare.py benchmarks/out/mixed_personal.json \\
        benchmarks/out/mixed_global.json

Reads two ``benchmarks/loop_learn.py`` outputs measured on the same population, project and
people (a mixed population, ``--population configs/users/mixed.yaml``): one run with
``--personal`` (the policy reads the server's per-session history), one with
``--no-personal`` (or several, e.g. one per learner). The *best single global policy* is the
best version of the global runs — every turn of every seed of every run given, the frozen
start included — by reward per request over everyone
(picked on the measured history itself: a choice that favours the global side). Each
personalised run's last version is set against it per kind of person (the population's
``type``): reward per request of that kind's requests, with its SE taking the *edit* as the
unit (one person types each edit), and the difference with the two SEs pooled. Where both
runs carry the reward per edit (``loop_learn.py`` from issue 35's paired comparison on),
the difference is also *paired by edit*: every measurement meets the same people typing the
same edits (``loop_learn.new_world``), so what an edit's difficulty adds to both sides
cancels (the loop gate's estimator, ``specialists.tab.loop.gate.paired_se``). And, since
the hindsight best is biased up by its own selection, once more with the best global
version chosen on one random half of the edits and judged on the other
(:func:`cross_fitted`, ``--splits``). Prints Markdown tables and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from specialists.tab.loop.gate import paired_se  # noqa: E402


def versions(rows: list[dict]) -> list[dict]:
    return [r for r in rows if "per_person" in r]


def served_globally(rows: list[dict]) -> list[dict]:
    """The single global policies a personal run measured beside itself (``loop_learn.py
    --serve-also``: the last version served with everyone's taste, as each kind of taste for
    everyone and as a person of no record), as versions of their own: candidates for the best global policy like any
    global run's. ``told`` (it knows who types) is not one."""
    out = []
    for r in versions(rows):
        for mode, fig in r.get("serving", {}).items():
            if mode == "told":
                continue
            out.append({"learner": f"{r.get('learner', '')} served {mode}", "seed": r["seed"], "turn": r["turn"],
                        "reward": fig["everyone"], "se": float("nan"),
                        "per_person": {k: v for k, v in fig.items() if k != "everyone"}})
    return out


def serving_lines(lasts: dict[int, dict], kinds: list[str]) -> list[str]:
    """Each personal version's last turn against the same version served other ways
    (``--serve-also``), per kind, paired by edit: what reading who asks adds at one
    rightness model, and how far it is from knowing who types (``told``)."""
    lines = ["| seed | serving | everyone | " + " | ".join(f"{k}" for k in kinds) + " | "
             + " | ".join(f"{k}: personal − this (2 × paired SE)" for k in kinds) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in kinds) + " | " + " | ".join("---" for _ in kinds) + " |"]
    for seed, r in sorted(lasts.items()):
        for mode, fig in r.get("serving", {}).items():
            cells = []
            for k in kinds:
                d, se = paired_by_edit(r["per_person"][k]["per_edit"], fig[k]["per_edit"])
                cells.append(f"{d:+.4f} ({2 * se:.4f})")
            lines.append(f"| {seed} | {mode} | {fig['everyone']:+.4f} | "
                         + " | ".join(f"{fig[k]['reward']:+.4f}" for k in kinds) + " | " + " | ".join(cells) + " |")
        lines.append(f"| {seed} | personal (the run) | {r['reward']:+.4f} | "
                     + " | ".join(f"{r['per_person'][k]['reward']:+.4f}" for k in kinds) + " | "
                     + " | ".join("" for _ in kinds) + " |")
    return lines


def edits_of(row: dict) -> dict[str, tuple[float, float]]:
    """Every measured edit of a version, whoever typed it: edit -> (reward sum, requests)."""
    return {e: tuple(v) for p in row["per_person"].values() for e, v in p["per_edit"].items()}


def _rate(units: dict[str, tuple[float, float]], keep: set[str]) -> float:
    r = sum(units[e][0] for e in keep if e in units)
    n = sum(units[e][1] for e in keep if e in units)
    return r / n if n else 0.0


def paired_by_edit(mine: dict[str, list], theirs: dict[str, list]) -> tuple[float, float]:
    """Reward per request (one kind's, or everyone's), ``mine`` minus ``theirs``, paired by edit (each an edit ->
    [reward sum, requests]), with its paired SE."""
    units = sorted(mine, key=int)
    d, se, _, _ = paired_se([tuple(mine[u]) for u in units], [tuple(theirs[u]) for u in units])
    return d, se


def cross_fitted(personal: list[dict], global_: list[dict], kinds: list[str], splits: int = 20,
                 seed: int = 0) -> dict:
    """The comparison with the best global policy chosen *without* the edits it is judged on.

    The hindsight best (``main``'s) is the maximum of many noisy versions measured on the same
    edits it is then compared on, so its reward is biased up (the winner's curse). Here the
    measured edits are halved at random; the best global version by reward over everyone on
    one half is compared, per kind and paired by edit, on the other half, and the halves swap,
    so every edit is judged once against a version chosen without it. The difference and its
    paired SE (selection held fixed) are averaged over ``splits`` seeded halvings. Per
    personalised seed and kind: {"diff", "paired_se", "better", "better_by_2_paired_se"}."""

    g_units = [edits_of(r) for r in global_]
    edits = sorted(g_units[0], key=int)
    out: dict[int, dict[str, dict]] = {}
    acc: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for split in range(splits):
        order = edits[:]
        random.Random(f"{seed}:{split}").shuffle(order)
        halves = (set(order[::2]), set(order[1::2]))
        chosen = {}
        for pick, judge in (halves, halves[::-1]):
            best = max(range(len(global_)), key=lambda i: _rate(g_units[i], pick))
            chosen.update({e: best for e in judge})
        for r in personal:
            for k in kinds:
                mine = r["per_person"][k]["per_edit"]
                theirs = {u: global_[chosen[u]]["per_person"][k]["per_edit"][u] for u in mine}
                acc.setdefault((r["seed"], k), []).append(paired_by_edit(mine, theirs))
    for (s, k), v in acc.items():
        d = sum(x for x, _ in v) / len(v)
        se = sum(y for _, y in v) / len(v)
        out.setdefault(s, {})[k] = {"diff": round(d, 5), "paired_se": round(se, 5),
                                    "better": d > 0, "better_by_2_paired_se": d > 2 * se}
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("personal", help="loop_learn.py --personal output (JSON)")
    p.add_argument("global_", metavar="global", nargs="+",
                   help="loop_learn.py --no-personal output(s) (JSON): with several (e.g. each learner's), "
                        "the best global version is the best of all of them")
    p.add_argument("--splits", type=int, default=20,
                   help="random halvings of the measured edits for the cross-fitted comparison "
                        "(best global chosen on one half, judged on the other; default 20; 0: off)")
    args = p.parse_args(argv)
    if args.splits < 0:
        p.error("--splits must be 0 (off) or more")
    pers = json.loads(Path(args.personal).read_text())
    globs = [json.loads(Path(f).read_text()) for f in args.global_]
    for name, run in [("personal", pers)] + [(f"global {f}", g) for f, g in zip(args.global_, globs)]:
        if not versions(run["rows"]):
            raise SystemExit(f"{name}: no per-person figures (run loop_learn.py with --population)")
    same = ("population", "project", "people", "reward", "ask_after_edit", "measure_pairs", "measure_worlds")
    absent = {"measure_worlds": 1}  # runs from before the option measured one draw of people
    for f, glob in zip(args.global_, globs):
        diff = [k for k in same if pers["args"].get(k, absent.get(k)) != glob["args"].get(k, absent.get(k))]
        if diff:
            raise SystemExit(f"{f} and the personalised run differ in {', '.join(diff)}: "
                             "compare runs of the same world")
    glob = {"rows": [r for g in globs for r in versions(g["rows"])] + served_globally(pers["rows"])}
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
    lines.append(line(f"best global: {best.get('learner', '')} seed {best['seed']}, turn {best['turn']}", best))
    out: dict = {"best_global": {"learner": best.get("learner", ""), "seed": best["seed"], "turn": best["turn"],
                                 "reward": best["reward"],
                                 "per_person": best["per_person"]}, "personal": {}}
    for seed, r in sorted(lasts.items()):
        lines.append(line(f"personalised: {r.get('learner', '')} seed {seed}, turn {r['turn']}", r))
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
                pd, pse = paired_by_edit(a["per_edit"], b["per_edit"])
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
    if paired and args.splits:
        cross = cross_fitted(list(lasts.values()), versions(glob["rows"]), kinds, args.splits)
        out["cross_fitted"] = {f"seed{s}": per for s, per in sorted(cross.items())}
        lines.append("")
        lines.append("| seed | " + " | ".join(
            f"{k}: − best global chosen on the other half of the edits (2 × paired SE)" for k in kinds) + " |")
        lines.append("| --- | " + " | ".join("---" for _ in kinds) + " |")
        for seed, per in sorted(cross.items()):
            lines.append(f"| seed{seed} | " + " | ".join(
                f"{per[k]['diff']:+.4f} ({2 * per[k]['paired_se']:.4f})" for k in kinds) + " |")
        out["cross_fitted_every_kind_better_every_seed"] = all(
            v["better"] for per in cross.values() for v in per.values())
        out["cross_fitted_every_kind_better_by_2_paired_se_every_seed"] = all(
            v["better_by_2_paired_se"] for per in cross.values() for v in per.values())
    out["every_kind_better_every_seed"] = all(v["better"] for per in out["personal"].values() for v in per.values())
    out["every_kind_better_by_2se_every_seed"] = all(v["better_by_2se"] for per in out["personal"].values()
                                                     for v in per.values())
    if any("serving" in r for r in lasts.values()):
        lines += ["", "The same personal version served other ways (`--serve-also`; its global servings are "
                  "candidates for the best global version above):", ""] + serving_lines(lasts, kinds)
    print("\n".join(lines))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
