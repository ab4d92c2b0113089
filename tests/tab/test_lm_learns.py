"""The LM learning where it is deployed (issue 15, ``specialists/tab/loop/lm_learner.py``;
``benchmarks/loop_learn.py --lm`` measures it): one update on a rewarded LM line moves the
LM's own weights so that line's log-probability rises (falls when it was rejected), and the
LM's fast pass and reuse caches answer with the new weights afterwards."""

from __future__ import annotations

import numpy as np
import pytest

from specialists.tab.context_copy import Candidate

LEFT = ("import os\nimport sys\n\n\ndef load(path, encoding='utf-8'):\n"
        "    with open(path, encoding=encoding) as fh:\n        return fh.read()\n\n\n"
        "def save(path, text):\n    with open(path, 'w') as fh:\n        fh.")
LINE = "write(text)"


def _score(lm, text: str = LINE) -> float:
    """log p_LM(text | LEFT) through the served path (fast pass, reuse caches)."""
    cand = Candidate(text=text, source="file", start=len(LEFT), end=len(LEFT))
    lm.analyze(LEFT, [cand], generate=False)
    return sum(cand.token_logprobs)


def _step(lm, reward: float):
    from specialists.tab.loop.lm_learner import Step
    from specialists.tab.features import Observation
    from specialists.tab.replay import Outcome

    cand = Candidate(text=LINE, source="lm", start=len(LEFT), end=len(LEFT))
    obs = Observation(static=np.zeros(1, np.float32), hidden=np.zeros(1, np.float32),
                      actions=np.zeros((1, 1), np.float32), rows=np.array([[0, len(LINE)]], np.int32),
                      candidates=[cand], cursor=len(LEFT))
    outcome = Outcome(shown=True, accepted=reward > 0, chars_saved=len(LINE) if reward > 0 else 0,
                      reward=reward, kind="insert")
    step = Step(obs, index=1, logprob=0.0, version=0, outcome=outcome, value=0.0,
                prompt=lm._prompt(LEFT))
    assert step.lm_shown
    return step


@pytest.mark.parametrize("reward", [0.75, -0.25])
def test_lm_update_moves_the_rewarded_line_and_refreshes_caches(tiny_checkpoint, reward) -> None:
    import torch

    from specialists.tab.loop.lm_learner import LMLearner
    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4, cache=8).load()
    before = _score(lm)
    assert _score(lm) == before  # the same request again: answered from the reuse caches
    kept = lm._cache
    learner = LMLearner(lm, "pg", lr=3e-3, seed=0)
    stats = learner.update([_step(lm, reward)])
    assert stats["lm_pg"] == 1 and stats["lm_steps"] == 1 and stats["lm_drift"] > 0
    # caches rebuilt: the fast pass's output head (a copy) is the model's new one, and
    # nothing kept from the old weights answers
    assert lm._cache is not kept and len(lm._cache.prompts._items) == 0
    assert torch.equal(lm.net.head, lm.model.lm_head.weight.detach().T)
    after = _score(lm)
    assert (after > before) if reward > 0 else (after < before), (before, after)
    # the served path agrees with the model itself (no stale copy of any weight)
    ids, tail = lm._prompt(LEFT)
    enc = lm.tokenizer.encode(tail + LINE)
    target = enc.ids[: lm.score_tokens]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids + target])).logits[0]
        logp = torch.log_softmax(logits, -1)
        direct = sum(float(logp[len(ids) + j - 1, t]) for j, t in enumerate(target)
                     if enc.offsets[j][1] > len(tail))  # tokens inside the typed tail are not scored
    assert abs(direct - after) < 1e-3


def test_pg_sft_also_learns_the_typed_line(tiny_checkpoint) -> None:
    from specialists.tab.loop.lm_learner import LMLearner
    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()
    typed = "close()"
    before = _score(lm, typed)
    step = _step(lm, 0.0)  # nothing shown, the user typed on
    step.index = 0
    step.outcome.shown = False
    step.typed = typed
    stats = LMLearner(lm, "pg_sft", lr=3e-3, sft=1.0, seed=0).update([step])
    assert stats["lm_pg"] == 0 and stats["lm_sft"] == 1
    assert _score(lm, typed) > before


def test_kl_guard_reports_and_still_follows_the_reward(tiny_checkpoint) -> None:
    from specialists.tab.loop.lm_learner import LMLearner
    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()
    before = _score(lm)
    learner = LMLearner(lm, "pg", lr=3e-3, kl=1.0, seed=0)
    first = learner.update([_step(lm, 0.75)])
    assert first["lm_kl"] == 0.0  # the first step starts at the reference
    second = learner.update([_step(lm, 0.75)])
    assert second["lm_kl"] > 0
    assert _score(lm) > before


def test_weights_changed_requantises_an_int8_lm(tiny_checkpoint) -> None:
    """An int8 LM's products are copies of the weights: after an in-place change they are
    made again, so the served logits follow the new weights."""
    import torch

    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48, int8=True).load()
    exact = TabLM(tiny_checkpoint, context_tokens=48).load()  # float32, changed the same way
    before = _score(lm)
    with torch.no_grad():
        for model in (lm.model, exact.model):
            for p in model.parameters():
                p.mul_(1.5)
    lm.weights_changed()
    exact.weights_changed()
    assert lm.net.int8 is not None and lm.net.head_int8 is not None
    after, wanted = _score(lm), _score(exact)
    assert abs(after - before) > 20 * abs(after - wanted)  # moved with the weights, to them
