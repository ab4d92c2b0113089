"""The learned route choice: will the cheap route succeed on this request?

Trained from evaluation traces (``complement router train RUN.json ...``): for every task
both the cheap route (e.g. the sketch cascade) and the strong route (e.g. the whole-file
rewrite) ran, so the label is whether the cheap route's result was exact. A logistic
regression over request features (instruction, file size, language, retrieval scores)
predicts P(cheap succeeds). As in RouteLLM, the threshold is calibrated rather than fixed:
we pick the one that maximises quality on held-out folds of the training traces while the
mean cost per request stays under a target.

The classifier is stored as JSON (weights, scaler, threshold, calibration table): no
pickle, readable, diffable.

``router.routing.LearnedPolicy`` is the ``learned`` routing policy for chat routes, built on
this classifier: above the threshold it runs the route's targets as a cascade (cheapest
first); below, only the last (strongest).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from router.errors import ConfigError

__all__ = ["LANGUAGES", "RouteClassifier", "calibrate", "features",
           "features_from_messages", "train_from_runs"]

LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")
_KEYWORDS = ("fix", "add", "remove", "rename", "refactor", "update", "move", "typo",
             "doc", "test", "deprecat", "support", "bump", "revert")


def features(instruction: str, file_text: str | None, language: str | None,
             retrieval_top: float | None = None) -> dict[str, float]:
    """Request features known before any model runs."""
    text = file_text or ""
    lines = text.count("\n") + 1 if text else 0
    low = instruction.lower()
    first = low.strip().splitlines()[0] if low.strip() else ""
    out = {
        "log_lines": math.log1p(lines),
        "log_chars": math.log1p(len(text)),
        "log_instruction_words": math.log1p(len(low.split())),
        "instruction_lines": float(min(20, len(low.strip().splitlines()))),
        "defs_per_100_lines": 100.0 * len(re.findall(r"^\s*(def|func|function|class)\b", text,
                                                     re.M)) / max(1, lines),
        "blank_share": sum(1 for ln in text.splitlines() if not ln.strip()) / max(1, lines),
        "retrieval_top": float(retrieval_top or 0.0),
        "has_retrieval": 1.0 if retrieval_top is not None else 0.0,
    }
    for lang in LANGUAGES:
        out[f"lang_{lang}"] = 1.0 if language == lang else 0.0
    for word in _KEYWORDS:
        out[f"kw_{word}"] = 1.0 if word in first else 0.0
    return out


_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def features_from_messages(messages: list[dict[str, Any]]) -> dict[str, float]:
    """Features of a chat request: the last user message; its largest code block as the file."""
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    content = str(content or "")
    blocks = _BLOCK.findall(content)
    code = max(blocks, key=len) if blocks else ""
    prose = _BLOCK.sub(" ", content)
    return features(prose, code, None)


@dataclass
class RouteClassifier:
    """Logistic regression on standardised features, with its calibrated threshold."""

    names: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)

    def predict(self, feats: dict[str, float]) -> float:
        z = self.intercept
        for name, mu, sd, w in zip(self.names, self.mean, self.scale, self.coef):
            z += w * (feats.get(name, 0.0) - mu) / sd
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def save(self, path: str | Path) -> None:
        import os
        import tempfile

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".router-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(self), fh, indent=1)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the classifier is a shared artefact
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: str | Path) -> "RouteClassifier":
        try:
            data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
            return cls(**data)
        except FileNotFoundError:
            raise ConfigError(f"route classifier {str(path)!r} not found; train one with "
                              "`complement router train RUN.json`") from None
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"route classifier {str(path)!r} is unusable: {exc}") from exc


def fit(rows: list[dict[str, float]], labels: list[int], c: float = 0.5) -> RouteClassifier:
    """A logistic regression (scikit-learn, L2) on standardised features."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    names = sorted(rows[0])
    x = np.array([[r.get(n, 0.0) for n in names] for r in rows])  # (N, F)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    y = np.array(labels)
    if len(set(labels)) < 2:  # one class only: a constant predictor says so honestly
        p = min(max(float(y.mean()), 1e-3), 1 - 1e-3)
        return RouteClassifier(names, mean.tolist(), scale.tolist(), [0.0] * len(names),
                               math.log(p / (1 - p)))
    model = LogisticRegression(C=c, max_iter=2000, class_weight="balanced")
    model.fit((x - mean) / scale, y)
    return RouteClassifier(names, mean.tolist(), scale.tolist(), model.coef_[0].tolist(),
                           float(model.intercept_[0]))


@dataclass
class _Example:
    feats: dict[str, float]
    cheap_ok: bool
    strong_ok: bool
    cheap_cost: float
    strong_cost: float


def calibrate(probs: list[float], examples: list[_Example],
              target_cost: float) -> tuple[float, list[dict[str, float]]]:
    """The threshold with the best quality whose mean cost stays under ``target_cost``.

    Returns (threshold, table of every candidate: threshold, cheap share, cost, quality).
    """
    candidates = sorted({0.0, 1.0 + 1e-9, *probs})
    table = []
    for t in candidates:
        cheap = [p >= t for p in probs]
        n = max(1, len(examples))
        cost = sum(e.cheap_cost if c else e.strong_cost for e, c in zip(examples, cheap)) / n
        quality = sum(e.cheap_ok if c else e.strong_ok for e, c in zip(examples, cheap)) / n
        table.append({"threshold": round(t, 6), "cheap_share": round(sum(cheap) / n, 4),
                      "cost_usd": cost, "quality": round(quality, 4)})
    ok = [row for row in table if row["cost_usd"] <= target_cost + 1e-12]
    if not ok:  # nothing fits: the cheapest choice, and the caller reports the miss
        best = min(table, key=lambda r: r["cost_usd"])
    else:
        best = max(ok, key=lambda r: (r["quality"], -r["cost_usd"]))
    return float(best["threshold"]), table


def _examples(runs: Iterable[dict[str, Any]], cheap: str, strong: str) -> list[_Example]:
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for rec in run.get("tasks", []):
            by_task.setdefault(rec["task"], {})[rec["route"]] = rec
    out = []
    for recs in by_task.values():
        if cheap in recs and strong in recs and recs[cheap].get("features"):
            c, s = recs[cheap], recs[strong]
            out.append(_Example(c["features"], bool(c["exact"]), bool(s["exact"]),
                                float(c["cost_usd"]), float(s["cost_usd"])))
    return out


def train_from_runs(run_paths: list[str | Path], cheap: str, strong: str, *,
                    target_cost_usd: float | None = None, target_cost_share: float = 0.5,
                    folds: int = 5, seed: int = 0) -> RouteClassifier:
    """Fit on every task both routes ran; calibrate the threshold on out-of-fold scores."""
    import random

    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in run_paths]
    examples = _examples(runs, cheap, strong)
    if len(examples) < 10:
        raise ConfigError(f"only {len(examples)} tasks ran both {cheap!r} and {strong!r} in "
                          f"{[str(p) for p in run_paths]}; run `complement eval` with both "
                          "routes on at least 10 tasks first")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    probs = [0.0] * len(examples)
    for k in range(folds):  # out-of-fold probabilities: the threshold is not fit on itself
        held = set(order[k::folds])
        train = [i for i in order if i not in held]
        model = fit([examples[i].feats for i in train], [int(examples[i].cheap_ok) for i in train])
        for i in held:
            probs[i] = model.predict(examples[i].feats)
    strong_cost = sum(e.strong_cost for e in examples) / len(examples)
    target = target_cost_usd if target_cost_usd is not None else target_cost_share * strong_cost
    threshold, table = calibrate(probs, examples, target)
    final = fit([e.feats for e in examples], [int(e.cheap_ok) for e in examples])
    final.threshold = threshold
    final.meta = {"cheap": cheap, "strong": strong, "tasks": len(examples),
                  "cheap_success": round(sum(e.cheap_ok for e in examples) / len(examples), 4),
                  "target_cost_usd": target, "strong_mean_cost_usd": strong_cost,
                  "runs": [str(p) for p in run_paths], "calibration": table}
    return final
