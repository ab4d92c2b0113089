"""Copilot's contextual-filter features, context copy, cut points and the baselines' rules."""

from __future__ import annotations

import math

import pytest

from specialists.tab.baselines import CopilotFilter, copy_min_match, truncate
from specialists.tab.context_copy import Candidate, Source, copy_candidates, next_edit_candidates
from specialists.tab.features import COPILOT_FEATURES, copilot_features, cut_points, line_cut, observe
from specialists.tab.types import RecentEdit, TabRequest


def feats(req: TabRequest) -> dict[str, float]:
    x = copilot_features(req)
    assert len(x) == len(COPILOT_FEATURES)
    return dict(zip(COPILOT_FEATURES, x))


def test_copilot_features_hand_made() -> None:
    file = "def f(a, b):\n    return g(\n"
    cursor = file.index("g(") + 2  # right after "g("
    f = feats(TabRequest(file=file, cursor=cursor, language="python", seconds_since_last=3.0,
                         last_outcome="accepted"))
    assert f["last_accepted"] == 1.0
    assert f["whitespace_right"] == 1.0  # only the newline follows
    assert f["log_seconds_since_last"] == pytest.approx(math.log1p(3.0))
    assert f["log_prefix_last_line"] == pytest.approx(math.log1p(len("    return g(")))
    assert f["log_prefix_last_line_rstrip"] == pytest.approx(math.log1p(len("    return g(")))
    assert f["log_document_length"] == pytest.approx(math.log1p(len(file)))
    assert f["log_cursor_offset"] == pytest.approx(math.log1p(cursor))
    assert f["relative_cursor"] == pytest.approx(cursor / len(file))
    assert f["lang=python"] == 1.0 and f["lang=other"] == 0.0
    assert f["last_char='('"] == 1.0
    assert f["last_nonspace='('"] == 1.0


def test_copilot_features_trailing_space_and_text_right() -> None:
    file = "x = foo(a, \n"
    cursor = len("x = foo(a, ")
    f = feats(TabRequest(file=file + "b)", cursor=cursor, language="cobol", last_outcome="rejected"))
    assert f["last_accepted"] == 0.0
    assert f["whitespace_right"] == 1.0
    assert f["log_prefix_last_line"] == pytest.approx(math.log1p(11))
    assert f["log_prefix_last_line_rstrip"] == pytest.approx(math.log1p(10))
    assert f["lang=other"] == 1.0
    assert f["last_char=' '"] == 1.0
    assert f["last_nonspace=','"] == 1.0
    assert f["log_seconds_since_last"] == 0.0  # first request: no decision yet
    g = feats(TabRequest(file="x = foo(a)", cursor=len("x = foo("), language="go"))
    assert g["whitespace_right"] == 0.0  # "a)" is right of the cursor
    assert g["lang=go"] == 1.0


def test_copilot_filter_fit_separates() -> None:
    # accepted exactly when the last suggestion was accepted: the weight must be large
    X, y = [], []
    for i in range(200):
        acc = i % 2
        req = TabRequest(file="a = b\n", cursor=4, language="python",
                         last_outcome="accepted" if acc else "rejected", seconds_since_last=1.0 + i % 7)
        X.append(copilot_features(req))
        y.append(acc if i % 10 else 1 - acc)  # 10% noise
    f = CopilotFilter.fit(X, y)
    w = f.named_weights()
    assert w["last_accepted"] > 1.0
    yes = TabRequest(file="a = b\n", cursor=4, language="python", last_outcome="accepted")
    no = TabRequest(file="a = b\n", cursor=4, language="python", last_outcome="rejected")
    assert f.probability(yes) > 0.5 > f.probability(no)


def test_copy_takes_longest_match_to_line_end() -> None:
    file = ("def area(self):\n    return self.width * self.height\n\n"
            "def scaled(self, k):\n    return self.width * k\n\n"
            "def other(self):\n    return self.width * ")
    cands = copy_candidates(file, [Source("file", file, exclude_end=len(file))], len(file))
    assert cands[0].text.split("\n")[0] == "self.height"
    assert cands[0].match_len >= len("    return self.width * ")
    assert cands[0].start == cands[0].end == len(file)
    assert {c.text.split("\n")[0] for c in cands} >= {"self.height", "k"}


def test_copy_ignores_the_cursor_itself_and_short_matches() -> None:
    file = "abcdefgh"
    assert copy_candidates(file, [Source("file", file, exclude_end=len(file))], len(file)) == []
    assert copy_candidates("ab", [Source("file", "ab ab", exclude_end=2)], 2, min_match=4) == []


def test_copy_from_recent_edit() -> None:
    left = "x = compute_total("
    edit = RecentEdit(old="y = compute_total(items, tax)\n", new="")
    cands = copy_candidates(left, [Source("edit", edit.old)], len(left))
    assert cands and cands[0].text.startswith("items, tax)")


def test_next_edit_repeats_a_recent_rename() -> None:
    file = "a = old_name(1)\nb = old_name(2)\n"
    edits = [RecentEdit(old="old_name", new="new_name", offset=0)]
    cands = next_edit_candidates(file, file.index("b = "), edits)
    assert cands
    c = cands[0]
    assert file[: c.start] + c.text + file[c.end :] == "a = old_name(1)\nb = new_name(2)\n"


def test_cut_points_and_line_cut() -> None:
    text = "self.width * k)\n    return x"
    cuts = cut_points(text)
    assert cuts[:3] == [4, 5, 10]  # self | . | width
    assert len(text.split("\n")[0]) in cuts and len(text) in cuts
    assert line_cut(text) == len("self.width * k)")
    assert line_cut("\n    return x") == len("\n    return x")
    assert line_cut("   \n") == 0


def test_observe_without_lm_has_actions_for_every_cut() -> None:
    file = "value = compute(alpha, beta)\nother = compute("
    obs = observe(TabRequest(file=file, cursor=len(file), language="python"))
    assert len(obs.rows) == obs.actions.shape[0] > 0
    texts = {obs.suggestion(i).text for i in range(len(obs.rows))}
    assert "alpha" in texts and "alpha, beta)" in texts


def _obs_with(cands: list[Candidate]):
    from specialists.tab.features import Observation

    return Observation(static=None, hidden=None, actions=None, rows=None, candidates=cands, cursor=5)


def test_truncate_cuts_at_first_low_logprob() -> None:
    lm = Candidate(text="foo(bar, baz)", source="lm", start=5, end=5,
                   token_logprobs=[-0.1, -0.2, -0.3, -2.0, -0.1], token_ends=[3, 4, 7, 8, 13])
    sug = truncate(-0.5)(None, _obs_with([lm]))
    assert sug is not None and sug.text == "foo(bar"
    assert truncate(-0.05)(None, _obs_with([lm])) is None


def test_copy_baseline_threshold() -> None:
    c = Candidate(text="x + 1\nmore", source="file", start=5, end=5, match_len=10)
    assert copy_min_match(8)(None, _obs_with([c])).text == "x + 1"
    assert copy_min_match(16)(None, _obs_with([c])) is None


def test_open_files_feed_context_copy() -> None:
    other = "def volume(w, h, d):\n    return w * h * d  # elsewhere\n"
    file = "x = 1\n\n\ndef volume(w, h, d):\n    return w * h"
    obs = observe(TabRequest(file=file, cursor=len(file), language="python"), open_files=[other])
    assert any(c.source == "open_file" and c.text.startswith(" * d") for c in obs.candidates)


def test_features_json_reads_back_as_the_same_float32_observation(tiny_checkpoint) -> None:
    """The event store's copy of an observation, written straight from the arrays, is the
    observation the loop trains on: every float32 the same, shapes the same."""
    import json

    import numpy as np

    from specialists.tab.features import ACTION_FEATURES, features_json, from_features, to_features
    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48).load()
    file = "value = compute(alpha, beta)\nother = compute("
    obs = observe(TabRequest(file=file, cursor=len(file), language="python"), lm=lm)
    text = features_json(obs)
    back, ref = json.loads(text), to_features(obs)
    assert set(back) == set(ref) and back["n_actions"] == ref["n_actions"] == len(obs.rows)
    for name in ("static", "hidden", "actions", "dynamic"):
        got = np.asarray(back[name], dtype=np.float32)
        assert got.shape == np.asarray(ref[name], dtype=np.float32).shape
        assert np.array_equal(got, np.asarray(getattr(obs, name), dtype=np.float32))
    again = from_features(back, len(ACTION_FEATURES))
    assert np.array_equal(again.actions, np.asarray(obs.actions, dtype=np.float32))
