"""The factored learner (issue 35, line 2): P(right) from every cut's typed-next label, times a
per-session, per-length taken share learnt by Thompson sampling."""

from __future__ import annotations

import numpy as np
import pytest

from specialists.tab.context_copy import Candidate
from specialists.tab.features import ACTION_FEATURES, DYNAMIC_FEATURES, STATIC_STATE, Observation
from specialists.tab.loop.factored import BANDS, FactoredCuts, Logistic, Tastes, band, typed_next
from specialists.tab.rewards import KeptReward

TEXT = "return compute_total(items, tax)"  # 32 characters: a short cut (6) and a long one (32)
CURSOR = 10


def _obs(signal: float) -> Observation:
    """One candidate cut twice, short and long; action feature 0 carries ``signal``, which says
    (in :func:`_events`) whether both cuts are right."""
    actions = np.zeros((2, len(ACTION_FEATURES)), np.float32)
    actions[:, 0] = signal
    cand = Candidate(text=TEXT, source="file", start=CURSOR, end=CURSOR)
    return Observation(static=np.zeros(len(STATIC_STATE), np.float32), hidden=np.zeros(0, np.float32),
                       actions=actions, rows=np.array([[0, 6], [0, len(TEXT)]], np.int32),
                       candidates=[cand], cursor=CURSOR, dynamic=np.zeros(len(DYNAMIC_FEATURES), np.float32))


def _events(n: int, seed: int = 0) -> list[tuple]:
    """Requests where the cuts are right exactly when the signal is 1, nothing shown."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = float(rng.random() < 0.3)
        out.append((_obs(s), [bool(s), bool(s)], 0, False, 0))
    return out


def test_typed_next_reads_which_cuts_the_person_went_on_to_type() -> None:
    obs = _obs(1.0)
    assert typed_next(obs, TEXT + "\n", CURSOR) == [True, True]
    assert typed_next(obs, "return compute_sum(x)", CURSOR) == [True, False]
    assert typed_next(obs, TEXT, CURSOR + 1) == [False, False]  # not at the cursor asked about


def test_logistic_finds_the_signal_and_survives_an_input_that_was_constant() -> None:
    rng = np.random.default_rng(1)
    x = np.zeros((2000, 3))
    x[:, 0] = rng.normal(size=2000)
    y = (rng.random(2000) < 1 / (1 + np.exp(-3 * x[:, 0]))).astype(float)
    m = Logistic(3).fit(x, y)
    assert m.prob(np.array([[2.0, 0, 0]]))[0] > 0.9 and m.prob(np.array([[-2.0, 0, 0]]))[0] < 0.1
    # input 1 was constant: a later value of it changes nothing (no blow-up through its spread)
    assert m.prob(np.array([[0.0, 50.0, 0]]))[0] == pytest.approx(m.prob(np.array([[0.0, 0, 0]]))[0])
    x[:, 1] = rng.normal(size=2000)  # refit warm with it varying: still finite and still right
    m.fit(x, y)
    assert np.isfinite(m.w).all() and m.prob(np.array([[2.0, 0, 0]]))[0] > 0.9
    with pytest.raises(ValueError, match="inputs"):
        m.fit(np.zeros((4, 2)), np.zeros(4))


def test_tastes_count_right_cuts_by_band_per_session_and_forget_the_oldest() -> None:
    assert [band(n) for n in (0, 7, 8, 15, 16, 31, 32, 500)] == [0, 0, 1, 1, 2, 2, 3, 3]
    t = Tastes(max_keys=2)
    t.record("a", 5, True)
    t.record("a", 40, False)
    t.record("a", 40, False)
    assert t.of("a")[0] == [1.0, 0.0] and t.of("a")[3] == [0.0, 2.0]
    t.record("b", 5, True)
    t.record("c", 5, True)  # a third session: the least recently used ("a") goes
    assert t.of("a") == [[0.0, 0.0]] * (len(BANDS) + 1)


@pytest.mark.parametrize("taste", ["bands", "curve"])
def test_each_session_is_shown_the_length_it_takes_and_nothing_where_no_cut_is_right(taste: str) -> None:
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste=taste)
    with pytest.raises(RuntimeError):
        model.choose_many([_obs(1.0)], explore=False)
    stats = model.update(_events(400))
    assert stats["right_rows"] == 800 and 0.2 < stats["right_share"] < 0.4
    tastes = Tastes()
    for _ in range(6):  # "brief" takes right short cuts and dismisses right long ones; "liner" the opposite
        tastes.record("brief", 6, True)
        tastes.record("brief", len(TEXT), False)
        tastes.record("liner", 6, False)
        tastes.record("liner", len(TEXT), True)
    asks = [_obs(1.0), _obs(1.0), _obs(0.0)]
    assert model.choose_many(asks, False, ["brief", "liner", "liner"], tastes) == [1, 2, 0]
    # global (no per-session record): one choice for everyone, the same for both right requests
    glob = model.choose_many(asks, False)
    assert glob[0] == glob[1] and glob[2] == 0


@pytest.mark.parametrize("taste", ["bands", "curve"])
def test_a_session_nobody_has_seen_is_explored_and_greedy_is_fixed(taste: str) -> None:
    model = FactoredCuts.for_reward(KeptReward(), seed=3, taste=taste)
    model.update(_events(400))
    tastes = Tastes()
    greedy = {tuple(model.choose_many([_obs(1.0)], False, ["new"], tastes)) for _ in range(20)}
    assert len(greedy) == 1
    drawn = {model.choose_many([_obs(1.0)], True, ["new"], tastes)[0] for _ in range(200)}
    assert {1, 2} <= drawn  # the draws try both lengths on a session with no record
    draws = np.array([model.taken(None, True) for _ in range(50)])
    assert ((draws > 0) & (draws < 1)).all() and draws.std(0).min() > 0


def test_update_refuses_labels_that_do_not_match_the_cuts_and_an_unknown_taste_is_refused() -> None:
    with pytest.raises(ValueError, match="labels"):
        FactoredCuts().update([(_obs(1.0), [True], 0, False, 0)])
    with pytest.raises(ValueError, match="taste"):
        FactoredCuts(taste="spline")


def test_a_taken_curve_reads_lengths_near_those_shown_and_keeps_the_latest() -> None:
    """``taste="curve"``: a session that took long right cuts and dismissed short ones rates a
    length it was never shown between them by the curve; the record keeps ``max_each``."""
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste="curve")
    model.update(_events(50))
    tastes = Tastes(max_each=10)
    for _ in range(8):
        tastes.record("liner", 40, True)
        tastes.record("liner", 5, False)
    p = model.taken_probs(np.array([5, 12, 25, 40]), "liner", tastes, explore=False)
    assert p[0] < 0.3 < 0.7 < p[3] and (np.diff(p) > 0).all()
    assert len(tastes.shown["liner"]) == 10 and tastes.of("liner")[3] == [8.0, 0.0]


def test_people_who_differ_widen_a_new_sessions_prior() -> None:
    """``curve`` with the collecting sessions' record: the prior a new session starts from is
    as wide as those sessions' curves lie apart, so the loop tries lengths as widely as its
    people differ; alike people leave it near ``spread``."""
    def world(differ: bool) -> FactoredCuts:
        tastes, events = Tastes(), _events(50)
        for i in range(8):
            for _ in range(6):
                for row, chars in ((1, 6), (2, len(TEXT))):  # a right short cut, a right long one
                    took = (row == 1) if not differ or i % 2 == 0 else (row == 2)
                    tastes.record(f"p{i}", chars, took)
                    events.append((_obs(1.0), [True, True], row, took, chars if took else 0))
        model = FactoredCuts.for_reward(KeptReward(), taste="curve", spread=0.5)
        model.update(events, tastes)
        return model

    slope = 1  # the curve's weight on log length
    narrow, wide = world(False)._prior_cov[slope, slope], world(True)._prior_cov[slope, slope]
    assert narrow == pytest.approx(0.25, abs=0.01) and wide > 3 * narrow


def test_a_curve_fit_is_never_read_from_another_record() -> None:
    """Each measurement gets a fresh record: the same session with as many right cuts shown in
    another record (which may even sit at a reused address) must get its own fit."""
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste="curve")
    model.update(_events(50))
    took_long, took_short = Tastes(), Tastes()
    for _ in range(6):
        took_long.record("p", 40, True)
        took_long.record("p", 5, False)
        took_short.record("p", 40, False)
        took_short.record("p", 5, True)
    long_first = model.taken_probs(np.array([5, 40]), "p", took_long, explore=False)
    del took_long
    short_then = model.taken_probs(np.array([5, 40]), "p", took_short, explore=False)
    assert long_first[1] > long_first[0] and short_then[0] > short_then[1]
    took_short.record("p", 40, True)  # one more record: refitted, not read from before
    assert model.taken_probs(np.array([40]), "p", took_short, explore=False)[0] > short_then[1]
