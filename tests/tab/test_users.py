"""The user world (issue 35): the population loader's validation, each trait in isolation on
scripted suggestions, the kept reward, seeding, and the oracle population = no population."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

import pytest

from specialists.tab.data import Pair
from specialists.tab.replay import Outcome, RewardConfig, Session
from specialists.tab.types import Suggestion, TabRequest
from specialists.tab.users import (KeptReward, Person, PopulationError, World, first_unit,
                                   load_population, parse_population)

USERS = Path(__file__).resolve().parents[2] / "configs" / "users"
BEFORE = "import os\n"
AFTER = BEFORE + ("\n\ndef load(path, encoding):\n    with open(path, encoding=encoding) as fh:\n"
                  "        return fh.read().strip()\n")


def pair(before: str = BEFORE, after: str = AFTER, language: str = "python") -> Pair:
    return Pair(repo="toy", path="toy.py", language=language, before=before, after=after, commit="c0ffee")


def person(traits: dict[str, Any], seed: int = 0) -> Person:
    pop = parse_population({"name": "t", "people": [{"type": "t", "traits": traits}]})
    return World(pop, seed=seed).person(0)


def rest_of_line(s: Session, req: TabRequest) -> Suggestion | None:
    """The real rest of the line: what the oracle accepts."""
    text = s.remaining().split("\n")[0]
    return Suggestion(req.cursor, req.cursor, text) if text.strip() else None


def wrong(s: Session, req: TabRequest) -> Suggestion:
    return Suggestion(req.cursor, req.cursor, "zzz_not_it()")


def play(p: Person | None, policy: Callable[[Session, TabRequest], Suggestion | None],
         the_pair: Pair | None = None) -> list[tuple[Suggestion | None, Outcome]]:
    s = Session(the_pair or pair(), person=p)
    out = []
    while (req := s.next_request()) is not None:
        sug = policy(s, req)
        out.append((sug, s.respond(sug)))
    return out


# -- the loader ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(f.stem for f in USERS.glob("*.yaml")))
def test_shipped_populations_load(name: str) -> None:
    """Every population in configs/users loads, under the name of its file."""
    pop = load_population(USERS / f"{name}.yaml")
    assert pop.name == name and pop.types


def test_the_shipped_populations_are_these() -> None:
    """The glob above found the files (an empty parametrisation would pass silently)."""
    assert {"default", "oracle", "impatient", "partial-takers", "noisy", "mixed", "mixed-length", "mixed-length-60"} <= {f.stem for f in USERS.glob("*.yaml")}


@pytest.mark.parametrize("data,message", [
    ({"name": "x", "people": [{"type": "a", "traits": {"lenght_tolerance": {}}}]},
     "unknown key 'lenght_tolerance' (did you mean 'length_tolerance'?)"),
    ({"name": "x", "people": [{"type": "a", "traits": {"noise": {"dismis": 0.1}}}]},
     "people[0].traits.noise: unknown key 'dismis' (did you mean 'dismiss'?)"),
    ({"name": "x", "people": [{"type": "a", "traits": {"noise": {"dismiss": 1.5}}}]},
     "people[0].traits.noise.dismiss: 1.5 is outside [0, 1]"),
    ({"name": "x", "people": [{"type": "a", "traits": {"flow": {"p": {"uniform": [0.5, 0.1]}}}}]},
     "low 0.5 above high 0.1"),
    ({"name": "x", "people": [{"type": "a", "traits": {"flow": {"p": {"gamma": [1, 2]}}}}]},
     "unknown key 'gamma'"),
    ({"name": "x", "people": [{"type": "a", "traits": {"length_tolerance": {"chars": {"beta": [1, 2]}}}}]},
     "beta is for probabilities"),
    ({"name": "x", "people": [{"type": "a", "traits": {"partial_accept": {"unit": "token"}}}]},
     "'token' is not one of word, line"),
    ({"name": "x", "people": [{"type": "a", "traits": {"noise": {"dismiss": "often"}}}]},
     "expected a number, got 'often'"),
    ({"name": "x", "people": []}, "a non-empty list of person types"),
    ({"name": "x", "poeple": []}, "unknown key 'poeple' (did you mean 'people'?)"),
    ({"name": "x", "people": [{"weight": 1}]}, "people[0].type: a name is required"),
    ({"name": "x", "people": [{"type": "a", "weight": 0}]}, "the weights sum to 0"),
])
def test_validation_names_the_key(data: dict, message: str) -> None:
    with pytest.raises(PopulationError) as err:
        parse_population(data)
    assert message in str(err.value)


def test_load_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\npeople:\n  - type: a\n    traits: {patience: {rejections: 0}}\n")
    with pytest.raises(PopulationError, match=r"bad.yaml.people\[0\].traits.patience.rejections: 0"):
        load_population(bad)
    with pytest.raises(PopulationError, match="missing.yaml"):
        load_population(tmp_path / "missing.yaml")


# -- seeding ------------------------------------------------------------------------------
def test_same_seed_same_people() -> None:
    pop = load_population(USERS / "default.yaml")
    a, b, c = World(pop, seed=1), World(pop, seed=1), World(pop, seed=2)
    assert [a.person(i).traits for i in range(8)] == [b.person(i).traits for i in reversed(range(8))][::-1]
    assert [a.person(i).kind for i in range(8)] == [b.person(i).kind for i in range(8)]
    assert [a.person(i).traits for i in range(8)] != [c.person(i).traits for i in range(8)]
    assert a.person(3) is a.person(3 + a.people)  # the world's people are reused in turn


def test_same_seed_same_outcomes() -> None:
    pop = load_population(USERS / "default.yaml")
    policy = lambda s, r: rest_of_line(s, r) if r.cursor % 2 else wrong(s, r)  # noqa: E731
    runs = [[o for _, o in play(World(pop, seed=5).person(i), policy)] for i in range(4)]
    again = [[o for _, o in play(World(pop, seed=5).person(i), policy)] for i in range(4)]
    assert runs == again


# -- the oracle ---------------------------------------------------------------------------
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "commits"


def _real_pairs() -> list[Pair]:
    from specialists.tab.data import load_split

    return load_split(DATA, "test", limit_per_project=3) if DATA.exists() else []


def test_oracle_population_is_todays_judgement() -> None:
    """No traits: every outcome, request and reward as with no person at all (toy edits, and
    real ones where the shared data is present)."""
    oracle = World(load_population(USERS / "oracle.yaml"), seed=0)
    rng = random.Random(0)
    choice = [rng.random() for _ in range(200)]
    for the_pair in (pair(), pair("a = 1\nb = 2\n", "a = 10\nb = 2\nc = a + b\n"), *_real_pairs()):
        def policy(s: Session, req: TabRequest, i: list[int] = [0]) -> Suggestion | None:
            i[0] += 1
            x = choice[i[0] % len(choice)]
            return rest_of_line(s, req) if x < 0.5 else (wrong(s, req) if x < 0.8 else None)

        for ask in (False, True):
            plain, with_oracle = Session(the_pair, ask_after_edit=ask), Session(the_pair, ask_after_edit=ask,
                                                                                 person=oracle.person(0))
            while (r1 := plain.next_request()) is not None:
                r2 = with_oracle.next_request()
                assert r2 is not None and r1.to_json() == r2.to_json()
                sug = policy(plain, r1)
                assert plain.respond(sug) == with_oracle.respond(sug)
            assert with_oracle.next_request() is None
            assert plain.saved_chars == with_oracle.saved_chars


# -- each trait in isolation --------------------------------------------------------------
def test_length_tolerance_dismisses_long_correct_suggestions() -> None:
    outs = play(person({"length_tolerance": {"chars": 10, "p": 1.0}}), rest_of_line)
    shown = [(s, o) for s, o in outs if s is not None]
    assert any(len(s.text) > 10 for s, _ in shown) and any(len(s.text) <= 10 for s, _ in shown)
    for s, o in shown:
        assert o.accepted == (len(s.text) <= 10)


def test_min_length_dismisses_short_correct_suggestions() -> None:
    who = person({"min_length": {"chars": 20, "p": 1.0}})
    took = [n for n in range(1, 60) if who.react(True, "x" * n, "x" * n, "python", None).accepted]
    assert took == list(range(20, 60))
    # a wrong suggestion is not taken for being long
    assert not who.react(False, None, "y" * 40, "python", None).accepted


def test_the_mixed_length_kinds_take_opposite_lengths() -> None:
    """The shipped ``mixed-length`` population: brief people take short right suggestions and
    (but for a 5% slip) no long ones, liners the other way round."""
    world = World(load_population(USERS / "mixed-length.yaml"), seed=0, people=32)
    people = [world.person(i) for i in range(32)]
    assert {p.kind for p in people} == {"brief", "liner"}

    def share(kind: str, lengths: range) -> float:
        asked = [(p, n) for p in people if p.kind == kind for n in lengths for _ in range(5)]
        return sum(p.react(True, "x" * n, "x" * n, "python", None).accepted for p, n in asked) / len(asked)

    assert share("brief", range(1, 9)) == 1.0 and share("brief", range(17, 60)) < 0.1
    assert share("liner", range(30, 60)) == 1.0 and share("liner", range(1, 20)) < 0.1


def test_mixed_length_60_is_mixed_length_with_more_brief_people() -> None:
    """``mixed-length-60``: the same two kinds with the same traits as ``mixed-length``, but 60
    brief people in 100 rather than half; a world of 400 draws about that share."""
    even, uneven = (load_population(USERS / f"{n}.yaml") for n in ("mixed-length", "mixed-length-60"))
    assert [(t.name, t.traits) for t in even.types] == [(t.name, t.traits) for t in uneven.types]
    assert {t.name: t.weight for t in uneven.types} == {"brief": 0.6, "liner": 0.4}
    world = World(uneven, seed=0, people=400)
    brief = sum(world.person(i).kind == "brief" for i in range(400)) / 400
    assert 0.53 < brief < 0.67  # 0.6 within 3 SE (0.0245 each)


def test_partial_accept_keeps_only_the_first_word() -> None:
    outs = play(person({"partial_accept": {"p": 1.0, "unit": "word"}}), rest_of_line)
    taken = [(s, o) for s, o in outs if o.accepted]
    assert taken
    for s, o in taken:
        assert s is not None and o.chars_saved == o.chars_kept == len(first_unit(s.text, "word"))
    assert any(o.chars_saved < len(s.text) for s, o in taken if s is not None)


def test_partial_taker_takes_the_right_first_word_of_a_wrong_line() -> None:
    def half_right(s: Session, req: TabRequest) -> Suggestion | None:
        word = first_unit(s.remaining(), "word")
        return Suggestion(req.cursor, req.cursor, word + " WRONG") if word.strip() else None

    assert not any(o.accepted for _, o in play(None, half_right))  # the oracle takes all or nothing
    outs = play(person({"partial_accept": {"p": 1.0}}), half_right)
    taken = [(s, o) for s, o in outs if o.accepted]
    assert taken and all(s is not None and o.chars_saved == len(s.text) - len(" WRONG") for s, o in taken)


def test_first_unit() -> None:
    assert first_unit("  open(path)", "word") == "  open"
    assert first_unit("(path)", "word") == "("
    assert first_unit("a = 1\nb = 2", "line") == "a = 1"


def test_noise_accepts_wrong_ones_and_the_kept_reward_gives_them_nothing() -> None:
    outs = play(person({"noise": {"accept_wrong": 1.0, "undo_after": 3}}), wrong)
    assert outs and all(o.accepted and o.chars_saved == 0 and o.undone_after == 3 for _, o in outs)
    kept = KeptReward()
    for _, o in outs:
        assert kept.kept(o) == 0
        assert kept.score(o) == kept.undo
        assert RewardConfig().score(o) == 0.75  # the accept key fools the old reward
        assert o.reward == 0.75
    late = KeptReward(window=2)  # undone after the window: the characters count as kept
    assert late.kept(outs[0][1]) == len("zzz_not_it()")
    # ... and the undo, past the horizon, costs nothing: what an editor reporting after
    # `window` keystrokes sees (KeptReward.of_event)
    assert late.score(outs[0][1]) == pytest.approx(late.per_char * len("zzz_not_it()"))


def test_noise_dismisses_correct_ones() -> None:
    outs = play(person({"noise": {"dismiss": 1.0}}), rest_of_line)
    assert any(s is not None for s, _ in outs)
    assert not any(o.accepted for _, o in outs)
    assert all(o.shown for s, o in outs if s is not None)


def test_flow_dismisses_while_keys_come_fast() -> None:
    always_fast = play(person({"flow": {"seconds": 3600, "p": 1.0}}), rest_of_line)
    # the first request has no time since the last: it is never in flow
    assert [o.accepted for s, o in always_fast if s is not None][1:] == \
        [False] * (sum(s is not None for s, _ in always_fast) - 1)
    never_fast = play(person({"flow": {"seconds": 0.0, "p": 1.0}}), rest_of_line)
    assert [o for _, o in never_fast] == [o for _, o in play(None, rest_of_line)]


def test_patience_switches_tab_off() -> None:
    outs = [o for _, o in play(person({"patience": {"rejections": 2, "off_requests": 3}}), wrong)]
    assert [o.switched_off for o in outs[:2]] == [False, True]
    assert [o.off for o in outs[2:5]] == [True, True, True] and not any(o.shown for o in outs[2:5])
    assert outs[5].shown and not outs[5].off
    kept = KeptReward()
    assert kept.score(outs[1]) == kept.dismiss + kept.off
    assert kept.score(outs[2]) == kept.none


def test_taste_per_language() -> None:
    traits = {"taste": {"python": 0.0, "default": 1.0}}
    assert not any(o.accepted for _, o in play(person(traits), rest_of_line))
    go = pair(language="go")
    assert [o for _, o in play(person(traits), rest_of_line, go)] == [o for _, o in play(None, rest_of_line, go)]


def test_kept_reward_of_a_correct_accept() -> None:
    outs = play(None, rest_of_line)
    kept = KeptReward()
    for s, o in outs:
        if o.accepted:
            assert kept.score(o) == pytest.approx(kept.per_char * o.chars_saved)
        elif s is not None:
            assert kept.score(o) == kept.dismiss
