"""The LM's shared passes (issue 17): several requests, segments and kept KV caches in one
``forward_rows`` give what one pass per sequence gives, and a person typing on reuses the
previous keystroke's prompt instead of running it again — with the same answers."""

from __future__ import annotations

import random

import pytest

from specialists.tab.context_copy import Candidate

TEXT = ("import os\nimport sys\n\n\ndef load(path, encoding='utf-8'):\n"
        "    with open(path, encoding=encoding) as fh:\n        return fh.read()\n\n\n"
        "def save(path, text):\n    with open(path, 'w') as fh:\n        fh.write(text)\n\n\n"
        "class A:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
        "    def total(self):\n        return self.x + self.y\n") * 3


@pytest.fixture(scope="module")
def lm(tiny_checkpoint):
    from specialists.tab.lm import TabLM

    return TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4).load()


def test_rows_with_segments_and_pasts_equal_one_pass_each(lm) -> None:
    import torch

    rng = random.Random(0)
    net = lm.net
    with torch.inference_mode():
        prompts = [[rng.randrange(300) for _ in range(n)] for n in (20, 7, 13)]
        pasts = [net.forward(torch.tensor([p]), None)[1] for p in prompts]
        segments = [[[5, 6, 7], [8], [9, 10]], [[11, 12, 13, 14]], [[15], [16, 17]]]
        hidden, _ = net.forward_rows([(segs, past) for segs, past in zip(segments, pasts)])
        for b, (segs, past) in enumerate(zip(segments, pasts)):
            offset = 0
            for seg in segs:
                alone, _ = net.forward(torch.tensor([seg]), past)
                got = hidden[b, offset : offset + len(seg)]
                assert torch.allclose(got, alone[0], atol=1e-4), (b, seg)
                offset += len(seg)
        # rows without a past, of different lengths, and the kept caches they return
        fresh, kept = net.forward_rows([([p], None) for p in prompts], keep=True)
        for b, p in enumerate(prompts):
            alone, past = net.forward(torch.tensor([p]), None)
            assert torch.allclose(fresh[b, : len(p)], alone[0], atol=1e-4)
            for (k1, v1), (k2, v2) in zip(kept[b], past):
                assert k1.shape == k2.shape and torch.allclose(k1, k2, atol=1e-4)
                assert torch.allclose(v1, v2, atol=1e-4)



def test_shared_rows_equal_the_prompt_pass_then_the_candidates(lm) -> None:
    """A shared row (a new prompt's tokens, then candidates that see them) gives the hidden
    states of running the prompt on its past and then each candidate on the extended cache,
    and keeps the extended cache; mixed in one pass with plain rows and padding."""
    import torch

    rng = random.Random(1)
    net = lm.net
    with torch.inference_mode():
        heads = [[rng.randrange(300) for _ in range(n)] for n in (15, 9)]
        pasts = [net.forward(torch.tensor([h]), None)[1] for h in heads] + [None]
        runs = [[20, 21, 22], [23], [24, 25, 26, 27, 28]]
        cands = [[[30, 31, 32], [33]], [[34, 35, 36, 37]], [[38, 39]]]
        rows = [([run] + segs, past) for run, segs, past in zip(runs, cands, pasts)]
        plain = ([[40, 41], [42]], pasts[0])  # an ordinary row beside them
        hidden, kept = net.forward_rows(rows + [plain], keep=True, shared=[True, True, True, False])
        for b, (run, segs, past) in enumerate(zip(runs, cands, pasts)):
            alone, extended = net.forward(torch.tensor([run]), past)
            assert torch.allclose(hidden[b, : len(run)], alone[0], atol=1e-4)
            for (k1, v1), (k2, v2) in zip(kept[b], extended):
                assert k1.shape == k2.shape and torch.allclose(k1, k2, atol=1e-4)
                assert torch.allclose(v1, v2, atol=1e-4)
            offset = len(run)
            for seg in segs:
                after, _ = net.forward(torch.tensor([seg]), extended)
                assert torch.allclose(hidden[b, offset : offset + len(seg)], after[0], atol=1e-4)
                offset += len(seg)
        offset = 0
        for seg in plain[0]:
            after, _ = net.forward(torch.tensor([seg]), pasts[0])
            assert torch.allclose(hidden[3, offset : offset + len(seg)], after[0], atol=1e-4)
            offset += len(seg)
        assert kept[3] is None  # a plain row of several segments keeps nothing


def test_scores_in_the_prompt_pass_equal_scores_after_it(tiny_checkpoint) -> None:
    """Candidates scored in a new prompt's own pass get the scores that a pass of their own
    on the prompt's kept state gives (an LM that has the prompt cached scores them apart)."""
    from specialists.tab.lm import TabLM

    apart = TabLM(tiny_checkpoint, context_tokens=48, cache=64).load()
    lefts = [TEXT[:n] for n in (120, 260, 333, 401)]
    texts = [["    return x", "\n"], ["self.x = x", "def", "wri"], [")"], ["fh.read()", "ab"]]
    for left, row in zip(lefts, texts):
        a = [Candidate(text=t, source="file", start=0, end=0) for t in row]
        b = [Candidate(text=t, source="file", start=0, end=0) for t in row]
        fresh = TabLM(tiny_checkpoint, context_tokens=48, cache=64).load()
        fresh.analyze(left, a, generate=False)  # prompt and candidates in one pass
        apart.analyze(left, [], generate=False)  # the prompt alone first...
        apart.analyze(left, b, generate=False)  # ...then the candidates on its kept state
        assert fresh.cache_stats()["prompts_misses"] == 1 and apart.cache_stats()["prompts_hits"] >= 1
        for x, y in zip(a, b):
            assert x.token_logprobs and x.token_ends == y.token_ends
            assert x.token_logprobs == pytest.approx(y.token_logprobs, abs=1e-4)

def _typing(text: str, start: int, every: int = 1) -> list[str]:
    """The left context after each keystroke of typing ``text[start:]``."""
    return [text[:k] for k in range(start, len(text) + 1, every)]


def test_typing_on_reuses_the_prompt_and_answers_the_same(tiny_checkpoint) -> None:
    from specialists.tab.lm import TabLM

    reusing = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4, cache=64).load()
    fresh = TabLM(tiny_checkpoint, context_tokens=48, gen_tokens=4, cache=0).load()
    lefts = _typing(TEXT, len(TEXT) - 160)
    for left in lefts:
        cands = [[Candidate(text="self.x + 1", source="file", start=0, end=0),
                  Candidate(text="fh.read()", source="file", start=0, end=0)] for _ in range(2)]
        a = reusing.analyze(left, cands[0])
        b = fresh.analyze(left, cands[1])
        assert a.prompt_tokens == b.prompt_tokens and a.tail == b.tail
        assert a.hidden == pytest.approx(b.hidden, abs=1e-4)
        assert (a.lm_candidate and a.lm_candidate.text) == (b.lm_candidate and b.lm_candidate.text)
        for x, y in zip(cands[0], cands[1]):
            assert x.token_ends == y.token_ends
            assert x.token_logprobs == pytest.approx(y.token_logprobs, abs=1e-4)
    stats = reusing.cache_stats()
    # most keystrokes ran only their new tokens on the previous prompt's cache
    assert stats["prompts_extended"] > len(lefts) // 3
    assert stats["prompt_tokens_saved"] > 10 * stats["prompts_extended"]
    assert fresh.cache_stats()["prompts_extended"] == 0


def test_anchored_prompts_keep_their_start_while_typing(tiny_checkpoint) -> None:
    from specialists.tab.lm import TabLM

    anchored = TabLM(tiny_checkpoint, context_tokens=48, anchor=16).load()
    sliding = TabLM(tiny_checkpoint, context_tokens=48, anchor=0).load()
    lefts = _typing(TEXT, len(TEXT) - 200, every=3)
    kept = moved = 0
    prev = None
    for left in lefts:
        ids, _ = anchored._prompt(left)
        assert 48 - 16 < len(ids) <= 48
        if prev is not None:
            kept += ids[:8] == prev[:8]
        prev = ids
        s_ids, _ = sliding._prompt(left)
        assert len(s_ids) == 48  # the last 48 tokens exactly
        moved += 1
    assert kept > 0.8 * (len(lefts) - 1)  # the start stays put between most keystrokes


def test_batched_lines_equal_single_lines(lm) -> None:
    """Concurrent requests decode their LM lines together, step by step."""
    lefts = [TEXT[:k] for k in (300, 420, 421, 611, 700, 905)]
    alone = [lm.analyze(left, []) for left in lefts]
    from specialists.tab.lm import TabLM

    other = TabLM(lm.path, context_tokens=48, gen_tokens=4).load()
    together = other.analyze_many([(left, [], True) for left in lefts])
    for a, b in zip(alone, together):
        assert (a.lm_candidate and a.lm_candidate.text) == (b.lm_candidate and b.lm_candidate.text)
        if a.lm_candidate is not None:
            assert a.lm_candidate.token_logprobs == pytest.approx(b.lm_candidate.token_logprobs, abs=1e-4)
        assert a.hidden == pytest.approx(b.hidden, abs=1e-4)


def _code_windows() -> list[str]:
    """Windows a person's keystrokes make: every file under specialists/ cut at many places,
    plus JavaScript, Go, tabs, CRLF, blank and whitespace-only lines, non-ASCII text."""
    from pathlib import Path

    texts = [p.read_text(encoding="utf-8") for p in sorted(Path("specialists").rglob("*.py"))[:12]]
    texts.append("function f(a, b) {\r\n\treturn a + b;\r\n}\r\n\r\n  \r\nconst x = f(1, 2);\n"
                 "// café — naïve 東京\n\n\n\tif (x) {\n\t\tconsole.log(`${x}`)\n\t}\n" * 4)
    texts.append("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n   \n"
                 "x := []int{1, 2}\n\n\n  // done's\n'tis\n" * 4)
    rng = random.Random(3)
    out = []
    for text in texts:
        for _ in range(80):
            end = rng.randrange(1, len(text) + 1)
            out.append(text[max(0, end - 384) : end])
    return out


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_window_encoded_in_two_parts_equals_the_whole(which, tiny_checkpoint) -> None:
    """``TabLM._encode`` keeps a window's settled lines' ids and encodes only the rest: the
    ids and where the last token starts must be those of encoding the whole window."""
    from pathlib import Path

    from specialists.tab.lm import TabLM

    path = tiny_checkpoint if which == "tiny" else Path("specialists/tab/checkpoint")
    lm = TabLM(path, context_tokens=48).load()
    assert lm._split_lines  # the project's tokenizers are byte-level BPE: the fast path runs
    windows = _code_windows()
    for window in windows + windows:  # the second round answers from the kept heads
        whole = lm.tokenizer.encode(window)
        ids, last = lm._encode(window)
        assert ids == whole.ids, repr(window[-60:])
        assert last == (whole.offsets[-1][0] if whole.ids else 0), repr(window[-60:])
    assert lm._settled.hits > 0


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_tokens_allowed_after_a_tail_are_those_whose_text_starts_with_it(which, tiny_checkpoint) -> None:
    """``TabLM._allowed`` finds the tokens that may continue a partial last token by
    bisection over the sorted texts: the same mask as testing every token's text."""
    from pathlib import Path

    import numpy as np

    from specialists.tab.lm import TabLM

    path = tiny_checkpoint if which == "tiny" else Path("specialists/tab/checkpoint")
    lm = TabLM(path, context_tokens=48).load()
    texts = [str(t) for t in lm.token_text]
    rng = random.Random(1)
    tails = {w[-k:] for w in _code_windows() for k in (1, 2, 3, 5) if len(w) >= k}
    tails |= {t[:k] for t in rng.sample(texts, 300) for k in range(1, len(t) + 1)}
    tails |= {"\U0010ffff", "a\U0010ffff", "\ufffd", " \n", "zzzzzzzzq"}
    counts = []
    for tail in sorted(tails):
        want = np.array([t.startswith(tail) for t in texts])
        got = lm._allowed_uncached(tail)
        assert np.array_equal(got, want), repr(tail)
        counts.append(int(want.sum()))
    assert lm._allowed_uncached("") is None
    assert min(counts) == 0 and max(counts) > 10  # both empty and wide runs were checked


def test_int8_products_answer_alone_as_batched_and_near_float32(tiny_checkpoint) -> None:
    """``int8``: each activation row is quantised on its own, so a sequence gets the same
    hidden states alone or batched with others (up to the float rounding of attention, which
    can move a value across a rounding step); and the logits stay near float32's."""
    import torch

    from specialists.tab.lm import TabLM

    lm8 = TabLM(tiny_checkpoint, context_tokens=48, int8=True).load()
    lm32 = TabLM(tiny_checkpoint, context_tokens=48).load()
    assert lm8.net.int8 is not None and lm32.net.int8 is None
    rng = random.Random(1)
    prompts = [[rng.randrange(300) for _ in range(n)] for n in (20, 7, 13)]
    with torch.inference_mode():
        batched, _ = lm8.net.forward_rows([([p], None) for p in prompts])
        for b, p in enumerate(prompts):
            alone, _ = lm8.net.forward(torch.tensor([p]), None)
            scale = alone.abs().max()
            assert (batched[b, : len(p)] - alone[0]).abs().max() <= 1e-3 * scale
            h32, _ = lm32.net.forward(torch.tensor([p]), None)
            assert (alone - h32).abs().max() <= 0.03 * h32.abs().max()  # ~1%: quantisation noise
            l8, l32 = lm8.net.logits(alone[0]), lm32.net.logits(h32[0])
            assert l8.shape == l32.shape == (len(p), lm32.tokenizer.get_vocab_size())
            assert (l8 - l32).abs().max() <= 0.03 * l32.abs().max()
            assert (l8.argmax(-1) == l32.argmax(-1)).float().mean() >= 0.9
    # whole analyses: the same candidates, scores within a few hundredths of a nat
    left = TEXT[:300]
    a = [Candidate(text=t, source="file", start=0, end=0) for t in ("self.x = x", "def", ")")]
    b = [Candidate(text=t, source="file", start=0, end=0) for t in ("self.x = x", "def", ")")]
    lm8.analyze(left, a, generate=False)
    lm32.analyze(left, b, generate=False)
    for x, y in zip(a, b):
        assert x.token_ends == y.token_ends
        assert x.token_logprobs == pytest.approx(y.token_logprobs, abs=0.25)


def test_numpy_step_equals_the_torch_pass(lm) -> None:
    """The LM's own line decodes in numpy (``_FastGPT2.step``): each step's token and
    log-probability, and the cache it extends, are the torch pass's to float rounding —
    for a cache from a pass (torch) and for one from an earlier step (numpy), and for
    several rows at once."""
    import numpy as np
    import torch

    rng = random.Random(1)
    net = lm.net
    with torch.inference_mode():
        prompts = [[rng.randrange(300) for _ in range(n)] for n in (3, 17, 40)]
        states = []
        for p in prompts:
            _, past = net.forward(torch.tensor([p[:-1]]), None)
            states.append((p[-1], past, p[-1], past))  # (torch token, torch cache, numpy's)
        for _ in range(5):
            stepped = net.step([(tok, past) for _, _, tok, past in states])
            nxt = []
            for (tok, past, _, _), (best, lp, cache) in zip(states, stepped):
                hidden, pasts = net.forward_rows([([[tok]], past)], keep=True, int8=False)
                logp = torch.log_softmax(net.logits(hidden[:, 0], int8=False), dim=-1)[0]
                assert best == int(logp.argmax())
                assert lp == pytest.approx(float(logp[best]), abs=1e-4)
                for (k, v), (k2, v2) in zip(pasts[0], cache):
                    assert np.allclose(k[0].numpy(), k2, atol=1e-4) and np.allclose(v[0].numpy(), v2, atol=1e-4)
                nxt.append((best, pasts[0], best, cache))
            states = nxt
