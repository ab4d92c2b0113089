"""Fit the reading scorer (issue 36): the recipe that makes ``scorer_weights.json``.

Sketches come from the development projects' commit histories only (``PROJECTS``; requests,
cobra and express are held out of every step), written by the two development generators
(``make_sketch``: every context size and noise; ``sketch_styles.make_frontier_sketch``: every
kind). The third style (``make_outline_sketch``) is never used here: it is kept out of
tuning. Commits are drawn as ``benchmarks/apply.py --seed 0`` shuffles them, skipping the
first ``dev_skip`` of each project (its development sample) and taking the next
``commits``; a share of them (``calibration``, by commit) is kept out of the fit and picks the
threshold.

Each sketch goes through the rules (``apply_sketch``) and the reading search; each candidate
file is a row (``search.FEATURES``), labelled 1 when it is the committed file up to
whitespace (the benchmark's line between an answer and a silent wrong one; the byte-exact
share is what the figures report).
The model is an L2-regularised logistic regression fitted by Newton's method in numpy. The
two thresholds (one for the rules' own answer, one for a reading the search found where
they abstained) are the pair that, on the calibration sketches, answers the most exactly
while leaving each generator's silent-wrong rate (answered, and not the committed file even
with whitespace normalised) under ``target`` (default 0.5%, the issue's line); where no pair
does, the pair that answers the most exactly with each generator's silent-wrong rate no
higher than the rules' own (``target_met_on_calibration`` says which).

    python -m specialists.apply.train_scorer --out specialists/apply/scorer_weights.json

Writes the weights (JSON: features, coefficients, threshold, the run's counts and the
calibration sketches' risk-coverage curve).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from specialists.apply.applier import apply_sketch
from specialists.apply.result import ApplyOptions
from specialists.apply.scorer import Scorer
from specialists.apply.search import FEATURES, features, normalised, search
from specialists.apply.sketch import make_sketch
from specialists.apply.sketch_styles import make_frontier_sketch

__all__ = ["PROJECTS", "fit", "risk_coverage", "sketch_rows", "threshold_for", "train"]

PROJECTS = ("attrs", "click", "flask", "httpx", "rich")
FRONTIER_KINDS = ("context", "context", "definition", "inner", "imports")
def commits(data: Path, project: str, skip: int, count: int) -> list[dict[str, Any]]:
    """``count`` commits of one project after the first ``skip`` of the benchmark's seed-0
    shuffle."""
    path = data / f"{project}.jsonl.gz"
    if not path.exists():
        raise FileNotFoundError(f"no commit history at {path}: pass --data, the folder of "
                                f"NAME.jsonl.gz histories")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    random.Random(0).shuffle(rows)
    return rows[skip:skip + count]


def sketches(row: dict[str, Any], n: int) -> Iterator[tuple[str, str]]:
    """(generator, sketch) of one commit, as the benchmark writes them (seeds of its own)."""
    before, after, language = row["before"], row["after"], row["language"]
    rng = random.Random(7_000_003 + n)
    specs: list[tuple[Any, str | None]] = [(0, None), (1, None), (2, None), (3, None),
                                           ("function", None)]
    specs += [(rng.choice((2, 3) if noise == "drop_blank" else (1, 2)), noise) for noise in
              ("shift", "no_first_marker", "no_last_marker", "drop_blank")]
    for k, noise in specs:
        sk = make_sketch(before, after, language, k=k if k != "function" else 3,
                         whole_function=k == "function", deletions="mixed",
                         seed=rng.randrange(1 << 30), noise=noise)
        if sk.changed:
            yield "lines", sk.text
    frng = random.Random(7_000_033 + n)
    for kind in FRONTIER_KINDS:
        fsk = make_frontier_sketch(before, after, language, frng, kind)
        if fsk.changed:
            yield "frontier", fsk.text


def sketch_rows(row: dict[str, Any], n: int, options: ApplyOptions) -> Iterator[dict[str, Any]]:
    """One record per sketch of the commit: its generator, the rules' outcome, and every
    candidate's features with its labels (exact, exact with whitespace normalised)."""
    after = row["after"]
    want = normalised(after)
    for generator, text in sketches(row, n):
        rules = apply_sketch(row["before"], text, row["language"], row["path"], options)
        found = search(row["before"], text, row["language"], options,
                       rules.merged if rules.applied else None, rules.reason, rules.stats)
        n_readings = sum(len(c.readings) for c in found.candidates)
        yield {
            "generator": generator,
            "rules_exact": bool(rules.applied and rules.merged == after),
            "rules_ws": bool(rules.applied and normalised(rules.merged or "") == want),
            "rules_applied": rules.applied,
            "rules_reason": rules.reason,
            "x": [features(c, found, n_readings) for c in found.candidates],
            "y": [c.text == after for c in found.candidates],
            "ws": [normalised(c.text) == want for c in found.candidates],
        }


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the bias columns of
    ``FEATURES`` regularised too, lightly enough not to matter at these sizes)."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        z = np.clip(x @ w, -30, 30)
        p = 1.0 / (1.0 + np.exp(-z))
        grad = x.T @ (p - y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


def _best(records: list[dict[str, Any]], w: np.ndarray) -> list[tuple[str, float, bool, bool, bool]]:
    """(generator, best probability, best is exact, best is exact up to whitespace, best is
    the rules' answer) per sketch; a sketch with no candidate counts as probability 0."""
    scorer = Scorer(tuple(w), 0.5, {})
    a_rules, b_rules = FEATURES.index("a_rules"), FEATURES.index("b_rules")
    out = []
    for rec in records:
        if not rec["x"]:
            out.append((rec["generator"], 0.0, False, False, False))
            continue
        probs = [scorer.probability(row) for row in rec["x"]]
        i = max(range(len(probs)), key=lambda k: (probs[k], rec["x"][k][a_rules]
                                                  + rec["x"][k][b_rules]))
        out.append((rec["generator"], probs[i], rec["y"][i], rec["ws"][i],
                    bool(rec["x"][i][a_rules])))
    return out


def risk_coverage(best: list[tuple[str, float, bool, bool, bool]], thresholds: list[float],
                  generator: str | None = None,
                  rules_threshold: float | None = None) -> list[dict[str, float]]:
    """Exact, abstain and silent-wrong rates over all sketches (of one generator) at each
    threshold (for the rules' answers too, unless ``rules_threshold`` is given)."""
    rows = [b for b in best if generator is None or b[0] == generator]
    n = max(len(rows), 1)
    curve = []
    for t in thresholds:
        answered = [b for b in rows if b[1] > 0 and b[1] >= (
            rules_threshold if b[4] and rules_threshold is not None else t)]
        curve.append({"threshold": t, "exact": round(sum(b[2] for b in answered) / n, 4),
                      "abstain": round(1 - len(answered) / n, 4),
                      "silent_wrong": round(sum(not b[3] for b in answered) / n, 4)})
    return curve


GRID = tuple(round(0.5 + 0.005 * i, 3) for i in range(100))
RULES_GRID = (0.0, 0.5, 0.7, 0.8, 0.85, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98)


def threshold_for(best: list[tuple[str, float, bool, bool, bool]],
                  target: float) -> tuple[float, float]:
    """(searched-reading threshold, rules threshold): of the pairs that keep every
    generator's silent-wrong rate under ``target``, the one with the most exact answers
    (mean over generators); ties to the higher thresholds."""
    return _best_pair(best, lambda g, r: r["silent_wrong"] < target)


def _best_pair(best: list[tuple[str, float, bool, bool, bool]],
               allowed: Any) -> tuple[float, float]:
    generators = sorted({b[0] for b in best})
    chosen, chosen_key = (GRID[-1], RULES_GRID[-1]), None
    for ta in RULES_GRID:
        for t in GRID:
            rows = [risk_coverage(best, [t], g, ta)[0] for g in generators]
            if all(allowed(g, r) for g, r in zip(generators, rows)):
                key = (sum(r["exact"] for r in rows) / len(rows), t, ta)
                if chosen_key is None or key > chosen_key:
                    chosen, chosen_key = (t, ta), key
    return chosen


def threshold_no_worse(best: list[tuple[str, float, bool, bool, bool]],
                       rules: dict[str, dict[str, float]]) -> tuple[float, float]:
    """Where no pair reaches ``target``: the pair with the most exact answers whose
    silent-wrong rate is, on every generator, no higher than the rules' own."""
    return _best_pair(best, lambda g, r: r["silent_wrong"] <= rules[g]["silent_wrong"])


def train(data: Path, out: Path, commits_per_project: int, dev_skip: int, calibration: float,
          target: float, l2: float, projects: tuple[str, ...] = PROJECTS,
          cache: Path | None = None) -> dict[str, Any]:
    started = time.time()
    options = ApplyOptions()
    records: list[dict[str, Any]] = []
    if cache is not None and cache.exists():
        records = json.loads(cache.read_text())
    else:
        for project in projects:
            for n, row in enumerate(commits(data, project, dev_skip, commits_per_project)):
                for rec in sketch_rows(row, n, options):
                    rec["project"], rec["commit"] = project, n
                    records.append(rec)
            print(f"{project}: {len(records)} sketches so far, {time.time() - started:.0f} s",
                  file=sys.stderr)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(records))
    rng = random.Random(0)
    keys = sorted({(r["project"], r["commit"]) for r in records})
    held = set(rng.sample(keys, int(round(len(keys) * calibration))))
    fit_recs = [r for r in records if (r["project"], r["commit"]) not in held]
    cal_recs = [r for r in records if (r["project"], r["commit"]) in held]
    x = np.array([row for r in fit_recs for row in r["x"]], dtype=float).reshape(-1, len(FEATURES))
    y = np.array([lab for r in fit_recs for lab in r["ws"]], dtype=float)
    if not len(y) or y.min() == y.max():
        raise ValueError("too few sketches to fit the scorer (every candidate has the same "
                         "label): raise --commits")
    w = fit(x, y, l2)
    best = _best(cal_recs or fit_recs, w)
    cal = cal_recs or fit_recs
    rules_rates = {g: {"exact": round(sum(r["rules_exact"] for r in cal if r["generator"] == g)
                                      / max(1, sum(r["generator"] == g for r in cal)), 4),
                       "silent_wrong": round(sum(r["rules_applied"] and not r["rules_ws"]
                                                 for r in cal if r["generator"] == g)
                                             / max(1, sum(r["generator"] == g for r in cal)), 4)}
                   for g in sorted({r["generator"] for r in cal})}
    target_met = any(all(risk_coverage(best, [t], g, ta)[0]["silent_wrong"] < target
                         for g in rules_rates) for ta in RULES_GRID for t in GRID)
    threshold, rules_threshold = (threshold_for(best, target) if target_met
                                  else threshold_no_worse(best, rules_rates))
    grid = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, threshold]
    weights = {
        "features": list(FEATURES),
        "coef": [round(float(c), 6) for c in w],
        "threshold": threshold,
        "rules_threshold": rules_threshold,
        "target_silent_wrong": target,
        "target_met_on_calibration": target_met,
        "made_by": (f"python -m specialists.apply.train_scorer --commits {commits_per_project} "
                    f"--dev-skip {dev_skip} --calibration {calibration} --target {target} "
                    f"--l2 {l2}"),
        "projects": list(projects),
        "sketches_fit": len(fit_recs), "candidates_fit": int(len(y)),
        "sketches_calibration": len(cal_recs),
        "calibration_rules": rules_rates,
        "calibration_curve": {g: risk_coverage(best, sorted(set(grid)), g)
                              for g in sorted({b[0] for b in best})},
        "calibration_shipped": {g: risk_coverage(best, [threshold], g, rules_threshold)[0]
                                for g in sorted({b[0] for b in best})},
        "seconds": round(time.time() - started, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(weights, indent=1) + "\n")
    tmp.replace(out)  # nothing half-written
    return weights


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("scorer_weights.json"))
    parser.add_argument("--data", type=Path, default=Path("../shared/data/commits"))
    parser.add_argument("--commits", type=int, default=120, help="commits per project")
    parser.add_argument("--dev-skip", type=int, default=150,
                        help="skip the benchmark's development sample of each project")
    parser.add_argument("--calibration", type=float, default=0.3,
                        help="share of commits kept out of the fit to pick the threshold")
    parser.add_argument("--target", type=float, default=0.005,
                        help="silent-wrong rate the threshold keeps each generator under")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--projects", nargs="+", default=list(PROJECTS))
    parser.add_argument("--cache", type=Path, default=None,
                        help="keep the sketches' features here (JSON), and reuse them")
    args = parser.parse_args(argv)
    bad = set(args.projects) & {"requests", "cobra", "express"}
    if bad:
        parser.error(f"{', '.join(sorted(bad))} held out of every training step: use the "
                     f"development projects ({', '.join(PROJECTS)})")
    weights = train(args.data, args.out, args.commits, args.dev_skip, args.calibration,
                    args.target, args.l2, tuple(args.projects), args.cache)
    print(json.dumps({k: v for k, v in weights.items() if k not in ("coef", "features")},
                     indent=1))
    return weights


if __name__ == "__main__":
    main()
