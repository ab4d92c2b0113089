"""The causal LM behind Tab: loads any local ``AutoModelForCausalLM`` checkpoint, scores
candidates, writes its own, and hands the policy its last hidden state.

One call per request, :meth:`TabLM.analyze` (or one for several concurrent requests,
:meth:`TabLM.analyze_many`, which shares the forward passes between them):

1. the prompt is the left context (at most ``context_tokens`` tokens), minus its last
   token (``tail``), so that the continuation can re-spell that token — token healing, since
   a request at a word boundary ends mid-token (``"x = "`` before ``"foo"``);
2. one forward pass over the prompt gives the hidden state and a KV cache;
3. the LM's own candidate is decoded greedily from the cache (its first token must start
   with ``tail``), to the end of the line or ``gen_tokens`` tokens;
4. the copy candidates, re-spelled from ``tail``, are scored in one batched pass on the
   cache: each gets its tokens' log-probabilities and where each token ends.

For GPT-2-shaped checkpoints (the one trained here) the forward pass is a few lines of
plain torch over the same weights (:class:`_FastGPT2`): the generic ``transformers`` path
costs ~4 ms per decoded token on this CPU in Python overhead alone, ten times the maths.
Any other architecture goes through ``transformers`` unchanged, only slower.

With ``cache`` > 0 the results of steps 2–4 are kept by token ids and reused when a later
request repeats them exactly, as a person's next keystroke often does (:class:`_Caches`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from specialists.tab.context_copy import Candidate

__all__ = ["TabLM", "LMAnalysis"]

V = TypeVar("V")


@dataclass
class LMAnalysis:
    hidden: Any  # (C,) float32 numpy: final hidden state at the last prompt token
    lm_candidate: Candidate | None
    prompt_tokens: int = 0
    tail: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _PromptState:
    """What one forward pass over a prompt leaves: enough to score and decode after it."""

    hidden: Any  # (C,) final hidden state at the last prompt token
    past: Any  # the KV cache: per layer (k, v) of (1, H, P, D), or a transformers cache
    first_logp: Any  # (V,) log-probabilities of the token after the prompt


class _LRU(Generic[V]):
    """A small least-recently-used map (``size`` 0: remembers nothing) that counts its hits;
    safe to share between threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return value

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` under ``key``; returns what is kept there (the first one, when two
        threads computed the same value at once)."""
        if self.size <= 0:
            return value
        with self._lock:
            value = self._items.setdefault(key, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return value


@dataclass
class _Caches:
    """Exact reuse between a person's keystrokes (issue 17): typing inside a token leaves the
    prompt (the left context minus its last token) unchanged, typing along a candidate
    leaves ``tail + candidate`` unchanged, and the LM's line after the same prompt and first
    token is the same, so those forward passes need not run again. Keys are token ids, so a
    hit is the same computation. ``prompts`` and ``lines`` hold KV caches (~0.4 MB each for
    the shipped model), hence the small default."""

    prompts: _LRU[_PromptState]
    scores: _LRU[list[float]]
    lines: _LRU[_Run]

    @classmethod
    def of_size(cls, prompts: int) -> "_Caches":
        return cls(_LRU(prompts), _LRU(prompts * 16), _LRU(prompts))

    def stats(self) -> dict[str, Any]:
        return {f"{name}_{what}": getattr(getattr(self, name), what)
                for name in ("prompts", "scores", "lines") for what in ("hits", "misses")}


def _stack_pasts(pasts: list[list[tuple[Any, Any]]]) -> list[tuple[Any, Any]]:
    """Per layer (k, v) with one row per sequence, from each sequence's prompt cache."""
    import torch

    if all(p is pasts[0] for p in pasts):  # one request's candidates: a view, no copy
        return [(k.expand(len(pasts), -1, -1, -1), v.expand(len(pasts), -1, -1, -1)) for k, v in pasts[0]]
    return [(torch.cat([p[i][0] for p in pasts]), torch.cat([p[i][1] for p in pasts]))
            for i in range(len(pasts[0]))]


class _FastGPT2:
    """GPT-2 forward over a ``GPT2LMHeadModel``'s weights with an explicit KV cache."""

    def __init__(self, model: Any) -> None:
        import torch

        t = model.transformer
        self.torch = torch
        self.F = torch.nn.functional
        self.n_head = model.config.n_head
        self.eps = model.config.layer_norm_epsilon
        self.wte = t.wte.weight.detach()
        self.wpe = t.wpe.weight.detach()
        self.max_positions = self.wpe.shape[0]
        self.layers = []
        for blk in t.h:
            self.layers.append((
                blk.ln_1.weight.detach(), blk.ln_1.bias.detach(),
                blk.attn.c_attn.weight.detach(), blk.attn.c_attn.bias.detach(),
                blk.attn.c_proj.weight.detach(), blk.attn.c_proj.bias.detach(),
                blk.ln_2.weight.detach(), blk.ln_2.bias.detach(),
                blk.mlp.c_fc.weight.detach(), blk.mlp.c_fc.bias.detach(),
                blk.mlp.c_proj.weight.detach(), blk.mlp.c_proj.bias.detach(),
            ))
        self.lnf = (t.ln_f.weight.detach(), t.ln_f.bias.detach())
        self.head = model.lm_head.weight.detach()

    def forward(self, ids: Any, past: list | None) -> tuple[Any, list]:
        """ids (B, T) after ``past`` (per layer (k, v) of (B, H, P, D)) -> final hidden (B, T, C)."""
        torch, F = self.torch, self.F
        B, T = ids.shape
        P = 0 if past is None else past[0][0].shape[2]
        x = self.wte[ids] + self.wpe[P : P + T]  # (B, T, C)
        C = x.shape[-1]
        H, D = self.n_head, C // self.n_head
        mask = None
        if past is not None and T > 1:
            mask = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        new_past = []
        for i, (l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, qw, qb) in enumerate(self.layers):
            h = F.layer_norm(x, (C,), l1w, l1b, self.eps)
            q, k, v = torch.addmm(ab, h.reshape(B * T, C), aw).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            if past is not None:
                k = torch.cat([past[i][0], k], dim=2)
                v = torch.cat([past[i][1], v], dim=2)
            new_past.append((k, v))
            if past is None:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
            else:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            a = a.transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(pb, a, pw).view(B, T, C)
            h = F.layer_norm(x, (C,), l2w, l2b, self.eps).reshape(B * T, C)
            h = F.gelu(torch.addmm(fb, h, fw), approximate="tanh")
            x = x + torch.addmm(qb, h, qw).view(B, T, C)
        return F.layer_norm(x, (C,), self.lnf[0], self.lnf[1], self.eps), new_past

    def logits(self, hidden: Any) -> Any:
        return hidden @ self.head.T


class _HFModel:
    """The same interface through ``transformers`` for any other causal LM."""

    def __init__(self, model: Any) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.max_positions = getattr(model.config, "max_position_embeddings", None) or \
            getattr(model.config, "n_positions", 2048)

    def forward(self, ids: Any, past: Any) -> tuple[Any, Any]:
        import copy
        import warnings

        if past is not None:  # transformers' caches grow in place: keep the caller's intact
            past = copy.deepcopy(past)
            if ids.shape[0] > 1:
                past.batch_repeat_interleave(ids.shape[0])
        with warnings.catch_warnings():  # newer releases rename the argument; both accept it
            warnings.simplefilter("ignore", FutureWarning)
            out = self.model(input_ids=ids, past_key_values=past, use_cache=True, output_hidden_states=True)
        return out.hidden_states[-1], out.past_key_values

    def logits(self, hidden: Any) -> Any:
        return self.model.get_output_embeddings()(hidden)


class TabLM:
    """A loaded checkpoint: tokenizer + model, warm, one thread by default."""

    def __init__(self, path: str | Path, *, context_tokens: int = 64, gen_tokens: int = 6,
                 score_tokens: int = 12, threads: int = 1, cache: int = 0) -> None:
        self.path = Path(path)
        self._cache = _Caches.of_size(cache)
        """Prompt states kept for reuse (0: none); see :class:`_Caches`."""
        self.context_tokens = context_tokens
        self.gen_tokens = gen_tokens
        self.score_tokens = score_tokens
        self.threads = threads
        self._loaded = False

    def load(self) -> "TabLM":
        if self._loaded:
            return self
        import numpy as np
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # no config chatter or progress bars in a server log
        hf_logging.disable_progress_bar()
        if self.threads:
            torch.set_num_threads(self.threads)
        self.tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        model = AutoModelForCausalLM.from_pretrained(str(self.path), local_files_only=True)
        model.eval()
        self.model = model
        self.net: _FastGPT2 | _HFModel = _FastGPT2(model) if model.config.model_type == "gpt2" else _HFModel(model)
        room = int(self.net.max_positions or 2048) - self.score_tokens - self.gen_tokens - 2
        self.context_tokens = min(self.context_tokens, room)
        vocab = self.tokenizer.get_vocab_size()
        self.token_text = np.array([self.tokenizer.decode([i]) for i in range(vocab)], dtype=object)
        self.newline_tokens = np.array(["\n" in t for t in self.token_text])
        self.hidden_size = int(model.config.hidden_size)
        self._allowed = lru_cache(maxsize=4096)(self._allowed_uncached)
        self._loaded = True
        return self

    def cache_stats(self) -> dict[str, int]:
        """Hits and misses of the reuse caches (prompts, scored sequences, LM lines)."""
        return self._cache.stats()

    def _allowed_uncached(self, tail: str) -> Any:
        import numpy as np

        if not tail:
            return None
        return np.fromiter((t.startswith(tail) for t in self.token_text), dtype=bool,
                           count=len(self.token_text))

    def _prompt(self, left: str) -> tuple[list[int], str]:
        window = left[-self.context_tokens * 6 :]
        enc = self.tokenizer.encode(window)
        ids, offsets = enc.ids, enc.offsets
        if not ids:
            return [], ""
        tail = window[offsets[-1][0] :]
        ids = ids[:-1][-self.context_tokens :]
        return ids, tail

    def analyze(self, left: str, candidates: list[Candidate], *, generate: bool = True) -> LMAnalysis:
        """Hidden state, the LM's own candidate, and token scores for ``candidates`` (in place)."""
        return self.analyze_many([(left, candidates, generate)])[0]

    def analyze_many(self, items: Sequence[tuple[str, list[Candidate], bool]]) -> list[LMAnalysis]:
        """:meth:`analyze` for several requests at once (``(left, candidates, generate)`` each).

        The prompts go through one forward pass per prompt length, and every request's
        copy candidates through one scoring pass per prompt length, so concurrent requests
        share the matrix products (issue 17); each LM line is then decoded on its own
        request's cache. The answers equal one-at-a-time answers up to float rounding.
        """
        import torch

        self.load()
        prompts = [self._prompt(left) for left, _, _ in items]
        eos = self.model.config.eos_token_id or 0
        keys = [tuple(ids) if ids else (eos,) for ids, _ in prompts]  # nothing typed: end-of-text
        with torch.inference_mode():
            states = self._prompt_states(keys)
            outs = [LMAnalysis(hidden=st.hidden.float().numpy().copy(), lm_candidate=None,
                               prompt_tokens=len(key), tail=tail)
                    for st, key, (_, tail) in zip(states, keys, prompts)]
            self._score_many([(cands, tail, key, st) for (_, cands, _), (_, tail), key, st
                              in zip(items, prompts, keys, states) if cands])
            for out, (left, _, generate), key, st in zip(outs, items, keys, states):
                if generate:
                    out.lm_candidate = self._generated(st, key, out.tail, len(left))
        return outs

    # -- the three LM steps, each answered from the cache when it can ---------------------
    def _prompt_states(self, keys: list[tuple[int, ...]]) -> list[_PromptState]:
        """Each prompt's last hidden state, KV cache and next-token log-probabilities."""
        import torch

        out: list[_PromptState | None] = [self._cache.prompts.get(k) for k in keys]
        todo: dict[int, list[tuple[int, ...]]] = {}
        for key, state in zip(keys, out):
            if state is None and key not in todo.get(len(key), []):
                todo.setdefault(len(key), []).append(key)
        batched = isinstance(self.net, _FastGPT2)  # transformers' caches stay one per request
        fresh: dict[tuple[int, ...], _PromptState] = {}
        for same_length in todo.values():
            for chunk in ([same_length] if batched else [[k] for k in same_length]):
                hidden, past = self.net.forward(torch.tensor(chunk), None)  # (B, T, C)
                last = hidden[:, -1]  # (B, C)
                first = torch.log_softmax(self.net.logits(last).float(), dim=-1)  # (B, V)
                for b, key in enumerate(chunk):
                    own = past if len(chunk) == 1 else [(k[b : b + 1].clone(), v[b : b + 1].clone())
                                                        for k, v in past]
                    state = _PromptState(last[b].clone(), own, first[b].clone()) if len(chunk) > 1 else \
                        _PromptState(last[0], own, first[0])
                    fresh[key] = self._cache.prompts.put(key, state)
        return [state if state is not None else fresh[key] for key, state in zip(keys, out)]

    def _score_many(self, jobs: list[tuple[list[Candidate], str, tuple[int, ...], _PromptState]]) -> None:
        """Token log-probabilities of every job's candidates (``tail`` re-spelled), in place."""
        encoded = [[self.tokenizer.encode(tail + c.text) for c in cands] for cands, tail, _, _ in jobs]
        seqs = [[tuple(e.ids[: self.score_tokens]) for e in row] for row in encoded]
        scores: dict[tuple, list[float]] = {}
        todo: dict[Any, list[tuple[int, tuple[int, ...]]]] = {}  # group -> (job, sequence)
        batched = isinstance(self.net, _FastGPT2)
        for j, ((_, _, key, _), row) in enumerate(zip(jobs, seqs)):
            for seq in row:
                hit = self._cache.scores.get((key, seq)) if seq else []
                if hit is not None:
                    scores[key, seq] = hit
                elif (j, seq) not in todo.setdefault(len(key) if batched else j, []):
                    todo[len(key) if batched else j].append((j, seq))
        for group in todo.values():
            scores.update(self._score_group([(jobs[j][2], jobs[j][3], seq) for j, seq in group]))
        for (cands, tail, key, _), row, enc_row in zip(jobs, seqs, encoded):
            for c, seq, enc in zip(cands, row, enc_row):
                scored = scores[key, seq]
                lps, ends = [], []
                for lp, span in zip(scored, enc.offsets):
                    end = span[1] - len(tail)
                    if end <= 0:
                        continue  # a token inside the already-typed tail
                    lps.append(lp)
                    ends.append(min(end, len(c.text)))
                c.token_logprobs, c.token_ends = lps, ends

    def _score_group(self, group: list[tuple[tuple[int, ...], _PromptState, tuple[int, ...]]]
                     ) -> dict[tuple, list[float]]:
        """One forward pass for sequences after prompts of one length: each sequence's
        tokens' log-probabilities (token 0's from the prompt's last state), also cached."""
        import torch

        width = max(len(seq) for _, _, seq in group) - 1  # the last token predicts nothing we score
        scored = [[float(st.first_logp[seq[0]])] for _, st, seq in group]
        if width > 0:
            batch = torch.tensor([list(seq[:-1]) + [0] * (width - len(seq) + 1)
                                  for _, _, seq in group])  # (N, W) right-padded
            pasts = [st.past for _, st, _ in group]
            # one KV cache row per sequence; transformers' forward repeats its one request's
            past = _stack_pasts(pasts) if isinstance(pasts[0], list) else pasts[0]
            hidden, _ = self.net.forward(batch, past)  # (N, W, C)
            # position j predicts token j + 1: only the rows whose next token is real
            rows = [(n, j) for n, (_, _, seq) in enumerate(group) for j in range(len(seq) - 1)]
            if rows:
                ns, js = torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])
                targets = torch.tensor([group[n][2][j + 1] for n, j in rows])
                logp = torch.log_softmax(self.net.logits(hidden[ns, js]).float(), dim=-1)  # (R, V)
                picked = logp.gather(1, targets[:, None])[:, 0].tolist()
                for (n, _), lp in zip(rows, picked):
                    scored[n].append(lp)
        return {(key, seq): self._cache.scores.put((key, seq), lps)
                for (key, _, seq), lps in zip(group, scored)}

    def _generated(self, state: _PromptState, key: tuple[int, ...], tail: str, cursor: int
                   ) -> Candidate | None:
        """The LM's own line, decoded greedily: the first token must re-spell ``tail``; the
        rest of the run depends only on the prompt and that token, so it is shared (and kept)
        by every request that picks the same first token after the same prompt."""
        import numpy as np
        import torch

        allowed = self._allowed(tail)
        logits = state.first_logp if allowed is None else \
            state.first_logp.masked_fill(torch.from_numpy(~allowed), float("-inf"))
        first = torch.log_softmax(logits, dim=-1)
        t0 = int(torch.argmax(first))
        if not np.isfinite(float(first[t0])):
            return None  # no token re-spells the tail
        run = self._cache.lines.get((key, t0)) or self._cache.lines.put((key, t0), _Run(state.past, t0))
        pieces: list[str] = []
        lps: list[float] = []
        ends: list[int] = []
        text_len = -len(tail)
        for step in range(self.gen_tokens):
            tok, lp = (t0, float(first[t0])) if step == 0 else run.token(step, self.net)
            piece = str(self.token_text[tok])
            stop = piece.find("\n", max(0, -text_len) if text_len < 0 else 0)
            if stop >= 0 and text_len + stop >= 0:
                piece = piece[:stop]
                if text_len + len(piece) > 0:
                    pieces.append(piece)
                    lps.append(lp)
                    ends.append(text_len + len(piece))
                break
            pieces.append(piece)
            text_len += len(piece)
            if text_len > 0:
                lps.append(lp)
                ends.append(text_len)
        text = "".join(pieces)[len(tail) :]
        if not text.strip():
            return None
        return Candidate(text=text, source="lm", start=cursor, end=cursor, token_logprobs=lps,
                         token_ends=ends)


class _Run:
    """Greedy decoding after one prompt from a given first token, extended only as far as
    some request reads it: ``token(step)`` is (token, its log-probability) at ``step`` ≥ 1."""

    def __init__(self, past: Any, first: int) -> None:
        self.past = past
        self.tokens = [first]
        self.logprobs = [0.0]  # step 0's depends on the request's tail: not kept
        self._lock = threading.Lock()

    def token(self, step: int, net: Any) -> tuple[int, float]:
        import torch

        with self._lock:
            return self._extend(step, net, torch)

    def _extend(self, step: int, net: Any, torch: Any) -> tuple[int, float]:
        while len(self.tokens) <= step:
            hidden, self.past = net.forward(torch.tensor([[self.tokens[-1]]]), self.past)
            logp = torch.log_softmax(net.logits(hidden[:, -1]).float()[0], dim=-1)
            tok = int(torch.argmax(logp))
            self.tokens.append(tok)
            self.logprobs.append(float(logp[tok]))
        return self.tokens[step], self.logprobs[step]
