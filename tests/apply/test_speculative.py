"""Speculative edits decode exactly what plain greedy decoding does, in fewer passes."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from specialists.apply.model import ModelApplier, greedy_decode, speculative_decode  # noqa: E402

VOCAB = 64


@pytest.fixture(scope="module")
def tiny_model():
    """A 2-layer GPT-2 with random weights, in float64 so batched and one-token forward
    passes agree exactly (no download: built from a config)."""
    torch.manual_seed(0)
    # A wide initialisation so that greedy output varies instead of repeating one token.
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=512, n_embd=32, n_layer=2,
                                     n_head=2, initializer_range=0.5, bos_token_id=0,
                                     eos_token_id=1)
    return transformers.GPT2LMHeadModel(config).double().eval()


def _corrupt(tokens: list[int], rng: random.Random) -> list[int]:
    """A draft that agrees with the output in long runs and differs in a few edits."""
    draft = list(tokens)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(draft))
        kind = rng.choice(("replace", "insert", "delete"))
        span = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 5))]
        if kind == "replace":
            draft[at:at + len(span)] = span
        elif kind == "insert":
            draft[at:at] = span
        else:
            del draft[at:at + len(span)]
    return draft


@pytest.mark.parametrize("seed", range(4))
def test_speculative_equals_greedy_on_random_inputs(tiny_model, seed):
    rng = random.Random(seed)
    prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(5, 40))]
    stop = {rng.randrange(VOCAB)} if seed % 2 else set()
    greedy, g_stats = greedy_decode(tiny_model, prompt, 80, stop)
    drafts = [
        _corrupt(greedy, rng),  # close to the output: most runs accepted
        [rng.randrange(VOCAB) for _ in range(100)],  # unrelated: almost all rejected
        [],  # nothing to propose
        greedy,  # exactly the output
    ]
    for draft in drafts:
        spec, s_stats = speculative_decode(tiny_model, prompt, draft, 80, stop,
                                           draft_len=rng.choice((4, 8, 24)))
        assert spec == greedy
        assert s_stats.forward_passes <= g_stats.forward_passes


def test_good_draft_cuts_forward_passes(tiny_model):
    rng = random.Random(1)
    prompt = [rng.randrange(VOCAB) for _ in range(20)]
    greedy, g_stats = greedy_decode(tiny_model, prompt, 150)
    spec, s_stats = speculative_decode(tiny_model, prompt, _corrupt(greedy, rng), 150)
    assert spec == greedy
    assert s_stats.forward_passes * 3 < g_stats.forward_passes
    assert s_stats.accepted > 0.7 * len(greedy)


class _ByteTokenizer:
    eos_token_id = None

    def encode(self, text: str) -> list[int]:
        return [b % VOCAB for b in text.encode()]

    def decode(self, ids) -> str:
        return bytes(i + 32 for i in ids).decode("latin-1")


def test_model_applier_rewrite_runs_both_ways(tiny_model):
    applier = ModelApplier(tiny_model, _ByteTokenizer(), max_new_tokens=40)
    fast, fast_stats = applier.rewrite("x = 1\n", "# ...\nx = 2\n")
    applier.speculative = False
    slow, slow_stats = applier.rewrite("x = 1\n", "# ...\nx = 2\n")
    assert fast == slow
    assert fast_stats.tokens == slow_stats.tokens
