"""CPU smoke runs of the two training scripts, and the LM wrapper on the tiny checkpoint."""

from __future__ import annotations

import json

import pytest

from specialists.tab.context_copy import Candidate


def test_pretrain_writes_a_loadable_checkpoint(tiny_checkpoint) -> None:
    for name in ("tokenizer.json", "config.json", "model.safetensors", "pretrain.json"):
        assert (tiny_checkpoint / name).exists(), name
    figures = json.loads((tiny_checkpoint / "pretrain.json").read_text())
    assert figures["steps"] == 3 and figures["parameters"] > 0


def test_fast_path_matches_transformers(tiny_checkpoint) -> None:
    import torch

    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48).load()
    ids = torch.randint(0, 300, (2, 20))
    with torch.inference_mode():
        ref = lm.model(input_ids=ids).logits
        h1, past = lm.net.forward(ids[:, :12], None)
        h2, _ = lm.net.forward(ids[:, 12:], past)
        ours = lm.net.logits(torch.cat([h1, h2], dim=1))
    assert torch.allclose(ours, ref, atol=1e-4)


def test_analyze_scores_candidates_and_generates(tiny_checkpoint) -> None:
    from specialists.tab.lm import TabLM

    lm = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()
    cands = [Candidate(text="return w * h\n", source="file", start=0, end=0),
             Candidate(text="x", source="file", start=0, end=0)]
    out = lm.analyze("def area(w, h):\n    ", cands)
    assert out.hidden.shape == (lm.hidden_size,)
    for c in cands:
        assert c.token_logprobs and len(c.token_logprobs) == len(c.token_ends)
        assert all(lp <= 0 for lp in c.token_logprobs)
        assert c.token_ends == sorted(c.token_ends) and c.token_ends[-1] <= len(c.text)
    if out.lm_candidate is not None:
        assert "\n" not in out.lm_candidate.text.strip("\n")
        assert len(out.lm_candidate.token_logprobs) <= 4


def test_policy_training_smoke(tiny_checkpoint) -> None:
    summary = json.loads((tiny_checkpoint / "train.json").read_text())
    versions = [row["version"] for row in summary["curve"]]
    assert versions == [1, 2, 3, 4]  # one on-policy update per batch
    assert any("dev/reward_per_request" in row for row in summary["curve"])
    assert (tiny_checkpoint / "policy.safetensors").exists()
    assert (tiny_checkpoint / "tab_training_curve.png").stat().st_size > 1000
    from specialists.tab.policy import TabPolicy

    assert TabPolicy.load(tiny_checkpoint).config.hidden_size == 32


def test_observation_cache_round_trip(toy_data, tmp_path) -> None:
    from specialists.tab.data import load_split
    from specialists.tab.harness import ObservationCache, run

    pairs = load_split(toy_data, "toy")
    first = ObservationCache(None, path=tmp_path / "c.pkl")
    m1 = run(pairs, lambda req, obs: obs.suggestion(0) if len(obs.rows) else None, first)
    first.save()
    second = ObservationCache(None, path=tmp_path / "c.pkl")
    assert len(second) == len(first) > 0
    m2 = run(pairs, lambda req, obs: obs.suggestion(0) if len(obs.rows) else None, second)
    assert second.misses == 0
    assert (m1.requests, m1.shown, m1.accepted, m1.chars_saved) == (m2.requests, m2.shown, m2.accepted, m2.chars_saved)


def test_train_without_lm(toy_data, tmp_path) -> None:
    from specialists.tab.train import Args, train

    summary = train(Args(data=str(toy_data), checkpoint="", out=str(tmp_path), train_split="toy",
                         dev_split="toy", train_per_project=0, dev_per_project=0, updates=2,
                         pairs_per_update=2, eval_every=1, cache_dir="", quiet=True))
    assert summary["best"]["requests"] > 0
    with pytest.raises(Exception):
        train(Args(data=str(toy_data), checkpoint="", out=str(tmp_path), train_split="nope", cache_dir="",
                   quiet=True))


def test_generic_transformers_path_agrees(tiny_checkpoint) -> None:
    """Any AutoModelForCausalLM goes through transformers; on GPT-2 it must match the fast path."""
    from specialists.tab.lm import TabLM, _HFModel

    fast = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()
    slow = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()
    slow.net = _HFModel(slow.model)
    left = "def area(w, h):\n    return "
    a = [Candidate(text="w * h\n", source="file", start=0, end=0)]
    b = [Candidate(text="w * h\n", source="file", start=0, end=0)]
    out_fast, out_slow = fast.analyze(left, a), slow.analyze(left, b)
    assert a[0].token_ends == b[0].token_ends
    assert a[0].token_logprobs == pytest.approx(b[0].token_logprobs, abs=1e-3)
    assert out_fast.hidden == pytest.approx(out_slow.hidden, abs=1e-3)
    assert (out_fast.lm_candidate is None) == (out_slow.lm_candidate is None)
    if out_fast.lm_candidate is not None:
        assert out_fast.lm_candidate.text == out_slow.lm_candidate.text


def test_policy_training_with_a_population_and_the_kept_reward(tiny_checkpoint, toy_data, tmp_path) -> None:
    """Issue 35: the training script takes a population and trains on the kept reward."""
    from pathlib import Path

    from specialists.tab.train import Args, train

    users = Path(__file__).resolve().parents[2] / "configs" / "users" / "noisy.yaml"
    summary = train(Args(data=str(toy_data), checkpoint=str(tiny_checkpoint), out=str(tmp_path),
                         train_split="toy", dev_split="toy", train_per_project=4, dev_per_project=2,
                         updates=2, pairs_per_update=2, eval_every=2, cache_dir="", quiet=True,
                         population=str(users), reward="kept"))
    assert [row["version"] for row in summary["curve"]] == [1, 2]
    assert summary["args"]["population"] == str(users)
    with pytest.raises(ValueError, match="not one of accept, kept"):
        train(Args(data=str(toy_data), checkpoint=str(tiny_checkpoint), out=str(tmp_path),
                   train_split="toy", dev_split="toy", cache_dir="", quiet=True, reward="kep"))
