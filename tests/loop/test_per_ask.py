"""Reward per request asked (``benchmarks/loop_learn.py``, issue 35): the requests Tab off
did not make count at 0, so a policy that drives a person to switch Tab off does not gain by
losing that person's requests from its denominator."""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "loop_learn.py"


@pytest.fixture(scope="module")
def loop_learn():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("loop_learn_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_per_ask_is_the_mean_and_se_of_the_rewards_padded_with_zeros(loop_learn) -> None:  # type: ignore[no-untyped-def]
    rewards = [0.75, -0.25, -0.25, 0.4, 0.0, -1.0, 0.3]
    padded = rewards + [0.0] * 5
    mean, se = loop_learn.per_ask(rewards, 5)
    assert mean == pytest.approx(statistics.fmean(padded))
    assert se == pytest.approx(statistics.stdev(padded) / math.sqrt(len(padded)))
    assert loop_learn.per_ask([], 0) == (0.0, 0.0)


def _step(reward: float, kind: str, shown: bool = True) -> SimpleNamespace:
    outcome = SimpleNamespace(reward=reward, shown=shown, accepted=reward > 0, switched_off=False,
                              chars_kept=0, chars_saved=0, undone_after=None)
    return SimpleNamespace(outcome=outcome, person=kind, pair=0)


def test_driving_a_person_off_wins_per_request_and_loses_per_ask(loop_learn) -> None:  # type: ignore[no-untyped-def]
    taker = [_step(0.2, "taker") for _ in range(50)]
    # A annoys the impatient person into switching Tab off: 10 bad requests, 40 never made;
    # B keeps them on with 50 slightly bad ones
    a = taker + [_step(-0.3, "impatient") for _ in range(10)]
    b = taker + [_step(-0.05, "impatient") for _ in range(50)]
    ta = loop_learn.Totals(keystrokes=1000, tab_off=40, tab_off_by_kind={"impatient": 40})
    tb = loop_learn.Totals(keystrokes=1000)
    ma, mb = loop_learn.measure(a, ta), loop_learn.measure(b, tb)
    assert ma["reward"] > mb["reward"]  # per request, A looks better ...
    assert ma["reward_per_ask"] < mb["reward_per_ask"]  # ... per request asked, B is
    assert ma["reward_per_ask"] == pytest.approx((50 * 0.2 - 10 * 0.3) / 100)
    assert mb["reward_per_ask"] == pytest.approx(mb["reward"])  # nothing off: the same reading
    kinds = loop_learn.per_person(a, ta)
    assert kinds["impatient"]["tab_off"] == 40 and kinds["taker"]["tab_off"] == 0
    assert kinds["impatient"]["reward_per_ask"] == pytest.approx(-0.3 * 10 / 50)


def test_the_kind_reference_silences_one_kind_and_leaves_the_rest_to_the_base(loop_learn) -> None:  # type: ignore[no-untyped-def]
    base = lambda obs: [loop_learn.Decision(3) for _ in obs]  # noqa: E731
    decide = loop_learn.kind_decider(base, "impatient")
    assert decide.by_kind
    out = decide([object(), object(), object()], ["taker", "impatient", "taker"])
    assert [d.index for d in out] == [3, 0, 3]


def test_each_draw_of_people_is_its_own_unit(loop_learn, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """--measure-worlds: the later history is typed once per draw of people, and a step's
    unit is (world, edit), so paired comparisons stay paired and kinds get more people."""
    worlds = []

    def fake_rollout(pairs, cache, decide, reward, world=None, tracker=None, totals=None):  # type: ignore[no-untyped-def]
        worlds.append(world)
        return [SimpleNamespace(pair=i) for i in range(len(pairs))]

    monkeypatch.setattr(loop_learn, "rollout", fake_rollout)
    monkeypatch.setattr(loop_learn, "new_world", lambda seed=0: f"world {seed}")
    monkeypatch.setattr(loop_learn, "POPULATION", object())
    monkeypatch.setattr(loop_learn, "MEASURE_WORLDS", 3)
    steps = loop_learn.measure_rollout(["a", "b"], None, None, None, loop_learn.Totals())
    assert worlds == ["world 0", "world 1", "world 2"]
    assert [s.pair for s in steps] == [0, 1, 2, 3, 4, 5]
