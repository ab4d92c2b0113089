"""Issue 36: the reading search, its learned score and the calibrated abstain, by kind of
sketch (``ApplyOptions(reading_search=True)``), and the recipe that makes the weights."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from specialists.apply import apply_sketch
from specialists.apply.result import ApplyOptions
from specialists.apply.scorer import Scorer, choose, default_scorer
from specialists.apply.search import FEATURES, READINGS, features, search
from specialists.apply.train_scorer import main as train_main

SEARCH = ApplyOptions(reading_search=True)
BEFORE = "".join(f"def f{i}(x):\n    value = x + {i}\n    return value\n\n\n" for i in range(12))
# two definitions whose bodies are the same lines: a body-only sketch fits both
TWINS = ("import os\n\n\ndef g(x):\n    y = x\n    return y\n\n\ndef h(x):\n    y = x\n"
         "    return y\n\n\ndef k():\n    return os.sep\n")
TWIN_SKETCH = "# ... existing code ...\n    y = x\n    y += 1\n    return y\n# ... existing code ...\n"


def test_the_shipped_weights_fit_the_features() -> None:
    scorer = default_scorer()
    assert len(scorer.coef) == len(FEATURES)
    assert 0.5 <= scorer.threshold < 1.0
    assert "train_scorer" in scorer.meta["made_by"]
    assert not {"requests", "cobra", "express"} & set(scorer.meta["projects"])


def test_unique_sketch_keeps_the_rules_answer_with_its_probability() -> None:
    after = BEFORE.replace("value = x + 3\n", "value = x + 30\n")
    sketch = ("# ... existing code ...\ndef f3(x):\n    value = x + 30\n    return value\n"
              "# ... existing code ...\n")
    plain = apply_sketch(BEFORE, sketch, "python")
    searched = apply_sketch(BEFORE, sketch, "python", options=SEARCH)
    assert plain.applied and searched.applied and searched.merged == plain.merged == after
    assert searched.stats["rules_status"] == "applied"
    assert searched.stats["scorer_probability"] >= searched.stats["scorer_threshold"]
    assert round(searched.confidence, 4) == searched.stats["scorer_probability"]


def test_a_threshold_no_probability_reaches_abstains_and_says_why() -> None:
    after = BEFORE.replace("value = x + 3\n", "value = x + 30\n")
    sketch = ("# ... existing code ...\ndef f3(x):\n    value = x + 30\n    return value\n"
              "# ... existing code ...\n")
    result = apply_sketch(BEFORE, sketch, "python",
                          options=ApplyOptions(reading_search=True, scorer_threshold=1.01,
                                               scorer_rules_threshold=1.01))
    assert not result.applied and "likely enough" in (result.reason or "")
    assert 0.0 < result.stats["scorer_probability"] < 1.01
    assert apply_sketch(BEFORE, sketch, "python").merged == after  # the rules alone answer


def test_a_sketch_that_fits_two_places_is_not_answered() -> None:
    rules = apply_sketch(TWINS, TWIN_SKETCH, "python")
    searched = apply_sketch(TWINS, TWIN_SKETCH, "python", options=SEARCH)
    assert not rules.applied
    assert not searched.applied
    # two readings, two files: neither is likely enough
    found = search(TWINS, TWIN_SKETCH, "python", ApplyOptions(), None, rules.reason)
    assert len(found.candidates) == 2
    best, p = choose(found, default_scorer())
    assert best is not None and p < default_scorer().threshold


def test_at_threshold_zero_a_searched_reading_answers_where_the_rules_abstain() -> None:
    result = apply_sketch(TWINS, TWIN_SKETCH, "python",
                          options=ApplyOptions(reading_search=True, scorer_threshold=0.0))
    assert result.applied and result.stats["rules_status"] == "abstained"
    assert set(result.stats["readings"]) <= set(READINGS) and result.stats["readings"]
    g = TWINS.replace("def g(x):\n    y = x\n", "def g(x):\n    y = x\n    y += 1\n")
    h = TWINS.replace("def h(x):\n    y = x\n", "def h(x):\n    y = x\n    y += 1\n")
    assert result.merged in (g, h)
    assert result.diff.startswith("diff --git a/file b/file\n--- a/file\n+++ b/file\n")
    assert "+    y += 1" in result.diff


def test_candidates_carry_the_declared_features_in_their_stage() -> None:
    rules = apply_sketch(TWINS, TWIN_SKETCH, "python")
    found = search(TWINS, TWIN_SKETCH, "python", ApplyOptions(), None, rules.reason)
    half = len(FEATURES) // 2
    for cand in found.candidates:
        row = features(cand, found, sum(len(c.readings) for c in found.candidates))
        assert len(row) == len(FEATURES)
        assert not any(row[:half]) and row[half] == 1.0  # stage B: the rules abstained
        assert set(cand.readings) <= set(READINGS)
    applied = search(BEFORE, "def f0(x):\n    value = x + 100\n# ... existing code ...\n",
                     "python", ApplyOptions(), BEFORE.replace("x + 0", "x + 100"), None, {})
    row = features(applied.candidates[0], applied, 1)
    assert row[0] == 1.0 and not any(row[half:])  # stage A: the rules' answer


def test_a_sketch_with_no_code_has_no_candidate_and_abstains() -> None:
    result = apply_sketch(BEFORE, "# ... existing code ...\n", "python", options=SEARCH)
    assert not result.applied and "no reading" in (result.reason or "")


def test_weights_for_other_features_are_refused_with_the_command(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"features": ["x"], "coef": [1.0], "threshold": 0.9}))
    with pytest.raises(ValueError, match="train_scorer"):
        Scorer.load(path)
    with pytest.raises(FileNotFoundError, match="train_scorer"):
        Scorer.load(tmp_path / "missing.json")


def _toy_history(folder: Path) -> None:
    rows = []
    for i in range(8):
        before = "".join(f"def f{j}(x):\n    value = x + {j}\n    return value\n\n\n"
                         for j in range(6 + i))
        after = before.replace(f"value = x + {i % 5}\n", f"value = x * {i + 2}\n    value += 1\n")
        if i % 3 == 0:
            after = after.replace("def f5(x):\n    value = x + 5\n    return value\n\n\n", "")
        rows.append({"repo": "attrs", "path": f"m{i}.py", "language": "python",
                     "before": before, "after": after})
    with gzip.open(folder / "attrs.jsonl.gz", "wt") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def test_the_recipe_writes_weights_the_applier_loads(tmp_path: Path) -> None:
    _toy_history(tmp_path)
    out = tmp_path / "weights.json"
    train_main(["--out", str(out), "--data", str(tmp_path), "--commits", "8", "--dev-skip", "0",
                "--projects", "attrs", "--calibration", "0.25"])
    scorer = Scorer.load(out)
    assert len(scorer.coef) == len(FEATURES) and any(scorer.coef)
    assert 0.5 <= scorer.threshold < 1.0
    assert scorer.meta["sketches_fit"] > 0 and scorer.meta["sketches_calibration"] > 0
    assert not list(tmp_path.glob("*.tmp"))


def test_the_recipe_refuses_held_out_projects(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        train_main(["--out", str(tmp_path / "w.json"), "--projects", "requests"])
    assert not (tmp_path / "w.json").exists()


def test_the_specialist_config_switches_the_search_on() -> None:
    from specialists.apply import ApplySpecialist
    from specialists.base import OptionsError

    off = ApplySpecialist()
    on = ApplySpecialist(reading_search=True, scorer_threshold=0.9)
    assert not off.apply_options.reading_search
    assert on.apply_options.reading_search and on.apply_options.scorer_threshold == 0.9
    with pytest.raises(OptionsError, match="scorer_threshold"):
        ApplySpecialist(reading_search=True, scorer_threshold=1.5)


# A test module whose edit is shown with no marker above it: the rules keep the import above
# (the first marker left out), the reading with no first marker read as the file's start
# deletes it, and both files pass every check (issue 36, the rules' answer with a clean
# alternative).
CODES = ("import httpx\n\n\ndef test_as_int():\n    assert httpx.codes.NOT_FOUND == 404\n"
         "    assert str(httpx.codes.NOT_FOUND) == \"404\"\n\n\ndef test_lookup():\n"
         "    assert httpx.codes(404) == 404\n")
CODES_EDIT = ("\ndef test_as_int():\n    # mypy does not know IntEnum members are ints\n"
              "    assert httpx.codes.NOT_FOUND == 404  # type: ignore\n"
              "    assert str(httpx.codes.NOT_FOUND) == \"404\"\n\n# ...\n")


def test_a_rules_answer_the_sketch_also_reads_to_another_clean_file_counts_it() -> None:
    rules = apply_sketch(CODES, CODES_EDIT, "python")
    assert rules.applied and rules.merged is not None and rules.merged.startswith("import httpx")
    found = search(CODES, CODES_EDIT, "python", ApplyOptions(), rules.merged, None, rules.stats)
    assert [c.text for c in found.candidates] == [rules.merged]  # still the one candidate
    assert found.alternatives >= 1 and not found.rules_unread
    row = features(found.candidates[0], found, 1)
    assert row[FEATURES.index("a_log_alternatives")] > 0
    # the same edit under a leading marker reads one way only
    marked = "# ... existing code ...\n" + CODES_EDIT
    again = apply_sketch(CODES, marked, "python")
    assert again.applied and again.merged == rules.merged
    one = search(CODES, marked, "python", ApplyOptions(), again.merged, None, again.stats)
    assert one.alternatives == 0
    assert features(one.candidates[0], one, 1)[FEATURES.index("a_log_alternatives")] == 0.0


def test_the_shipped_score_trusts_a_rules_answer_less_when_another_clean_reading_exists() -> None:
    rules = apply_sketch(CODES, CODES_EDIT, "python")
    found = search(CODES, CODES_EDIT, "python", ApplyOptions(), rules.merged, None, rules.stats)
    _, with_alternative = choose(found, default_scorer())
    found.alternatives = 0
    _, without = choose(found, default_scorer())
    assert with_alternative < without
