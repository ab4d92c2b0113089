"""The factored learner (issue 35, line 2): P(right) from every cut's typed-next label, times a
per-session, per-length taken share learnt by Thompson sampling."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specialists.tab.context_copy import Candidate
from specialists.tab.features import ACTION_FEATURES, DYNAMIC_FEATURES, STATIC_STATE, Observation
from specialists.tab.loop.factored import (BANDS, HIT_FEATURES, Dismissals, FactoredCuts, Hits, Logistic, Net, Tastes, band, latent_kinds,
                                          right_features, typed_next)
from specialists.tab.rewards import KeptReward
from specialists.tab.types import Suggestion

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


@pytest.mark.parametrize("taste", ["bands", "curve", "mixture"])
def test_each_session_is_shown_the_length_it_takes_and_nothing_where_no_cut_is_right(taste: str) -> None:
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste=taste)
    with pytest.raises(RuntimeError):
        model.choose_many([_obs(1.0)], explore=False)
    tastes = Tastes()
    for _ in range(6):  # "brief" takes right short cuts and dismisses right long ones; "liner" the opposite
        tastes.record("brief", 6, True)
        tastes.record("brief", len(TEXT), False)
        tastes.record("liner", 6, False)
        tastes.record("liner", len(TEXT), True)
    stats = model.update(_events(400), tastes)  # mixture: the kinds of taste are read from this record
    assert stats["right_rows"] == 800 and 0.2 < stats["right_share"] < 0.4
    asks = [_obs(1.0), _obs(1.0), _obs(0.0)]
    assert model.choose_many(asks, False, ["brief", "liner", "liner"], tastes) == [1, 2, 0]
    # global (no per-session record): one choice for everyone, the same for both right requests
    glob = model.choose_many(asks, False)
    assert glob[0] == glob[1] and glob[2] == 0


@pytest.mark.parametrize("taste", ["bands", "curve", "mixture"])
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


def _two_kinds(differ: bool, seed: int = 0) -> Tastes:
    """16 sessions' right cuts shown: with ``differ``, half take only short ones (up to 12
    characters) and half only long ones (25 and more); else all take only long ones. One
    answer in 20 the other way."""
    rng = np.random.default_rng(seed)
    tastes = Tastes()
    for s in range(16):
        liner = s % 2 == 1 or not differ
        for _ in range(int(rng.integers(5, 30))):
            chars = int(rng.choice([4, 6, 10, 14, 20, 28, 40]))
            took = (chars >= 25) if liner else (chars <= 12)
            tastes.record(f"p{s}", chars, took != (rng.random() < 0.05))
    return tastes


def test_latent_kinds_finds_as_many_kinds_as_people_show() -> None:
    def kinds(tastes: Tastes) -> list:
        return latent_kinds([(np.log1p([c for c, _ in shown]), [a for _, a in shown])
                             for shown in tastes.shown.values()], np.zeros(2), np.eye(2) / 1.5 ** 2)

    two = kinds(_two_kinds(True))
    assert len(two) == 2 and sorted(round(share, 1) for share, _, _ in two) == [0.5, 0.5]
    slopes = sorted(w[1] for _, w, _ in two)  # one kind's curve falls with length, the other's rises
    assert slopes[0] < -1 and slopes[1] > 1
    alike = kinds(_two_kinds(False))
    assert all(w[1] > 1 for _, w, _ in alike)  # every kind found among alike people takes long cuts
    assert latent_kinds([], np.zeros(2), np.eye(2))[0][0] == 1.0  # nobody: one kind, the prior


def _two_kind_learner() -> tuple[FactoredCuts, Tastes]:
    """A mixture learner fitted on the collecting sessions of :func:`_two_kinds` (two kinds of
    taste), each of their right cuts shown as an event, and those sessions' record."""
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste="mixture")
    tastes = _two_kinds(True)
    events = _events(50)
    for shown in tastes.shown.values():
        events += [(_obs(1.0), [True, True], 1 if chars < 20 else 2, took, chars if took else 0)
                   for chars, took in shown]
    model.update(events, tastes)
    return model, tastes


def test_one_dismissal_tells_a_new_session_its_kind_of_taste() -> None:
    """``taste="mixture"``: with the collecting sessions of two kinds, a new session is of
    either kind (long cuts rated between the two), and one right short cut dismissed makes
    it of the kind that takes long ones; one taken, of the other."""
    model, tastes = _two_kind_learner()
    assert len(model._mixture) == 2
    lengths = np.array([5, 40])
    fresh = Tastes()
    cold = model.taken_probs(lengths, "new", fresh, explore=False)
    assert 0.25 < cold[0] < 0.75 and 0.25 < cold[1] < 0.75
    fresh.record("liner", 6, False)
    fresh.record("brief", 6, True)
    liner = model.taken_probs(lengths, "liner", fresh, explore=False)
    brief = model.taken_probs(lengths, "brief", fresh, explore=False)
    assert liner[1] > 0.7 > 0.3 > liner[0] and brief[0] > 0.7 > 0.3 > brief[1]
    drawn = np.array([model.taken_probs(lengths, "new", fresh, explore=True) for _ in range(100)])
    assert (drawn[:, 1] > 0.7).any() and (drawn[:, 1] < 0.3).any()  # a new session's draws try both kinds


def test_a_network_reads_rightness_a_logistic_regression_cannot() -> None:
    """Right exactly when two inputs agree in sign (no line separates it): the network learns
    it, the logistic regression stays near the base rate; the same seed, the same network."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6000, 3))
    y = ((x[:, 0] > 0) == (x[:, 1] > 0)).astype(float)
    probe = np.array([[1.5, 1.5, 0.0], [-1.5, -1.5, 0.0], [1.5, -1.5, 0.0], [-1.5, 1.5, 0.0]])
    net = Net(3, epochs=6, seed=0).fit(x, y)
    p = net.prob(probe)
    assert p[0] > 0.8 and p[1] > 0.8 and p[2] < 0.2 and p[3] < 0.2
    flat = Logistic(3).fit(x, y).prob(probe)
    assert np.abs(flat - 0.5).max() < 0.15
    assert np.allclose(Net(3, epochs=6, seed=0).fit(x, y).prob(probe), p)
    with pytest.raises(ValueError, match="inputs"):
        net.fit(np.zeros((4, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="right_model"):
        FactoredCuts(right_model="forest")


def test_a_factored_learner_with_a_network_shows_the_right_cuts() -> None:
    model = FactoredCuts.for_reward(KeptReward(), seed=0, taste="curve", right_model="net")
    model.update(_events(400))
    assert isinstance(model.right, Net)
    assert model.choose_many([_obs(0.0)], False)[0] == 0  # a wrong cut is not worth a dismissal
    assert model.right.prob(right_features(_obs(1.0)))[0] > 0.9


def test_hits_settle_each_cut_by_what_was_typed_since_and_only_by_that() -> None:
    hits = Hits(long=16, decay=1.0)
    obs = _obs(1.0)  # cuts "return" (6) and the whole TEXT (32)
    first = hits.request("s", 0, TEXT + "\n", obs)
    assert first.tolist() == [0.0, 0.0, 0.0, 0.5, 0.0]  # nothing settled yet: no history
    # eight characters typed: "return" is settled right, the long cut still open (a request
    # with no cut of its own in between)
    bare = replace(obs, actions=np.zeros((0, len(ACTION_FEATURES)), np.float32), rows=np.zeros((0, 2), np.int32))
    after = hits.request("s", 0, (TEXT + "\n")[8:], bare)
    assert after[0] == 0.0  # the first request is not settled until its long cut is
    # the rest of the line typed: the first request's long cut was right
    third = hits.request("s", 0, "\n", obs)
    names = dict(zip(HIT_FEATURES, third))
    assert names["log_resolved"] == pytest.approx(np.log1p(1.0))
    assert names["log_long_right"] == pytest.approx(np.log1p(1.0)) and names["log_long_wrong"] == 0.0
    assert names["mean_log_best"] == pytest.approx(np.log1p(len(TEXT)))
    # a session that types something else: its long cuts part from what it types, settled wrong
    other = Hits(long=16, decay=1.0)
    other.request("t", 0, "return compute_sum(x)\n", obs)
    wrong = dict(zip(HIT_FEATURES, other.request("t", 0, "x)\n", obs)))
    assert wrong["log_long_wrong"] == pytest.approx(np.log1p(1.0)) and wrong["log_long_right"] == 0.0
    assert wrong["long_right_share"] < 0.5 < names["long_right_share"]
    assert wrong["mean_log_best"] == pytest.approx(np.log1p(6))  # "return" was right
    # a place whose rest ends inside the long cut: once the person is typing elsewhere, all
    # of that rest was typed and the long cut was not; sessions are apart
    moved = Hits(long=16, decay=1.0)
    moved.request("u", 0, TEXT[:12], obs)
    far = dict(zip(HIT_FEATURES, moved.request("u", 1, "anything", obs)))
    assert far["log_long_wrong"] == pytest.approx(np.log1p(1.0))
    assert hits.request("new", 0, TEXT, obs)[0] == 0.0


def test_right_features_read_hits_where_the_observation_carries_them() -> None:
    obs = _obs(1.0)
    plain = right_features(obs)
    with_hits = right_features(obs.with_hits(np.arange(len(HIT_FEATURES), dtype=np.float32)))
    assert with_hits.shape == (2, plain.shape[1] + 2 * len(HIT_FEATURES))
    assert np.array_equal(with_hits[:, : plain.shape[1]], plain)
    assert with_hits[1, plain.shape[1] + 2] == 2.0
    assert with_hits[1, -1] == pytest.approx(4.0 * np.log1p(len(TEXT)))


def test_calibration_reads_how_right_the_latest_rows_were_by_length() -> None:
    # the earlier events: both cuts right with the signal; the latest fifth: only the short one
    events = _events(2000, seed=3)
    late = [(o, [labels[0], False], i, a, k) for o, labels, i, a, k in _events(500, seed=4)]
    plain = FactoredCuts.for_reward(KeptReward())
    plain.update(events + late)
    calibrated = FactoredCuts.for_reward(KeptReward(), calibrate=0.2)
    calibrated.update(events + late)
    x, chars = right_features(_obs(1.0)), [6, len(TEXT)]
    before, after = plain.right_prob(x, chars), calibrated.right_prob(x, chars)
    assert after[1] < 0.2 < before[1]  # the long cut: right far less often of late
    assert after[0] > 0.8  # the short one still right
    with pytest.raises(ValueError, match="calibrate"):
        FactoredCuts(calibrate=1.0)


def _carrying(text: str) -> Observation:
    """One candidate ``text`` at the cursor, cut after its first word and whole."""
    obs = _obs(1.0)
    cand = Candidate(text=text, source="file", start=CURSOR, end=CURSOR)
    return replace(obs, candidates=[cand], rows=np.array([[0, text.index(" ")], [0, len(text)]], np.int32))


def test_dismissals_follow_a_suggestion_while_the_typing_keeps_to_it() -> None:
    d = Dismissals()
    d.dismissed("s", 0, TEXT + "\n", Suggestion(CURSOR, CURSOR, TEXT), CURSOR)
    # three characters typed along it: the whole cut carries the dismissed one on, the word does not
    assert d.request("s", 0, (TEXT + "\n")[3:], _carrying(TEXT[3:])) == [(), (len(TEXT),)]
    # typing that parts from it lets it go, for good
    assert d.request("s", 0, "x" + (TEXT + "\n")[4:], _carrying(TEXT[4:])) == [(), ()]
    assert d.request("s", 0, (TEXT + "\n")[5:], _carrying(TEXT[5:])) == [(), ()]
    # another place lets it go; another session never had it
    d.dismissed("t", 0, TEXT, Suggestion(CURSOR, CURSOR, TEXT), CURSOR)
    assert d.request("t", 1, TEXT, _carrying(TEXT)) == [(), ()]
    assert d.request("u", 0, TEXT, _carrying(TEXT)) == [(), ()]
    # only a completion at the cursor is followed: a jump, or one elsewhere, is not
    d.dismissed("v", 0, TEXT, Suggestion(CURSOR, CURSOR, TEXT, jump=True), CURSOR)
    d.dismissed("v", 0, TEXT, Suggestion(CURSOR + 1, CURSOR + 1, TEXT), CURSOR)
    assert d.request("v", 0, TEXT, _carrying(TEXT)) == [(), ()]


@pytest.mark.parametrize("takes_long", [True, False])
def test_a_dismissal_speaks_against_rightness_as_much_as_the_persons_taste_says(takes_long: bool) -> None:
    model = FactoredCuts.for_reward(KeptReward())
    rng = np.random.default_rng(5)  # with the signal, both cuts right half the time
    events = []
    for obs, labels, index, accepted, kept in _events(1000):
        right = bool(labels[0] and rng.random() < 0.5)
        events.append((obs, [right, right], index, accepted, kept))
    model.update(events)
    model.pooled[band(len(TEXT))] = [95.0, 5.0] if takes_long else [2.0, 98.0]
    obs = _obs(1.0)
    before = model.expected(obs)
    after = model.expected(obs.with_dismissed([(), (len(TEXT),)]))
    assert after[0] == pytest.approx(before[0])  # the short cut does not carry the dismissed one on
    q_before = (before[1] - model.dismiss) / (model.per_char * model.kept_share * len(TEXT) - model.dismiss)
    q_after = (after[1] - model.dismiss) / (model.per_char * model.kept_share * len(TEXT) - model.dismiss)
    if takes_long:  # one who takes right lines dismissed it: it was likely wrong
        assert q_after < 0.2 * q_before
    else:  # one who seldom takes a long one says little by dismissing it
        assert q_after > 0.9 * q_before


def test_serve_as_one_kind_or_the_mixture_and_aside_leaves_the_learner_as_it_was() -> None:
    """``serve_as`` (``loop_learn.py --serve-also``): everyone served as the kind that takes
    short cuts, as the one that takes long ones, or as a person of no record (the kinds by
    their shares); whatever a block under :meth:`FactoredCuts.aside` draws or sets, the
    learner's next draws are those it would have made without it."""
    model, tastes = _two_kind_learner()
    lengths = np.array([5, 40])
    served = {}
    with model.aside():
        for kind in (0, 1, "mixture"):
            model.serve_as = kind
            served[kind] = model.taken_probs(lengths, "anyone", tastes, explore=True)
            model.taken_probs(lengths, "new", Tastes(), explore=True)  # draws inside the block
    assert served[0][0] > 0.7 > 0.3 > served[0][1]  # the short kind, whoever asks
    assert served[1][1] > 0.7 > 0.3 > served[1][0]
    assert 0.25 < served["mixture"][0] < 0.75 and 0.25 < served["mixture"][1] < 0.75
    assert model.serve_as is None
    after = [model.taken_probs(lengths, "new", Tastes(), explore=True) for _ in range(5)]
    fresh, _ = _two_kind_learner()  # the same learner, no block set aside
    assert np.allclose(after, [fresh.taken_probs(lengths, "new", Tastes(), explore=True) for _ in range(5)])
