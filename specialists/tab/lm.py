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

import bisect
import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from specialists.tab.context_copy import Candidate

__all__ = ["TabLM", "LMAnalysis"]

V = TypeVar("V")

_HEAD = 8
"""Prompts that share at least this many leading tokens are looked up for KV-cache reuse."""
_ANCHOR_CHARS = 256
"""An anchored prompt's text starts at the first line start after a multiple of this."""


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
    heads: _LRU[tuple[int, ...]] = field(default_factory=lambda: _LRU(0))
    """A prompt's first :data:`_HEAD` tokens -> the latest prompt kept that starts so."""
    extended: int = 0  # prompts computed on a kept prompt's KV cache
    tokens_saved: int = 0  # prompt tokens those did not run again

    @classmethod
    def of_size(cls, prompts: int) -> "_Caches":
        return cls(_LRU(prompts), _LRU(prompts * 16), _LRU(prompts), _LRU(prompts * 4))

    def stats(self) -> dict[str, Any]:
        out = {f"{name}_{what}": getattr(getattr(self, name), what)
               for name in ("prompts", "scores", "lines") for what in ("hits", "misses")}
        return {**out, "prompts_extended": self.extended, "prompt_tokens_saved": self.tokens_saved}

    def keep_prompt(self, key: tuple[int, ...], state: _PromptState) -> _PromptState:
        if len(key) > _HEAD:
            self.heads.put(key[:_HEAD], key)
        return self.prompts.put(key, state)

    def prefix_of(self, key: tuple[int, ...]) -> tuple[int, _PromptState] | None:
        """A kept prompt that shares more than :data:`_HEAD` leading tokens with ``key``:
        (how many tokens of its KV cache ``key`` can reuse, its state), or None."""
        if len(key) <= _HEAD:
            return None
        other = self.heads.get(key[:_HEAD])
        state = self.prompts.get(other) if other is not None else None
        if state is None or other is None:
            return None
        same = len(os.path.commonprefix([key, other]))
        same = min(same, len(key) - 1)  # the last token must run: its hidden state is the answer
        return (same, state) if same > _HEAD else None


def _int8_columns(w: Any) -> tuple[Any, Any]:
    """``w`` (in, out) as int8 with one scale per output column: (weights, scales)."""
    import torch

    scale = w.abs().amax(0).clamp(min=1e-12) / 127.0
    return torch.round(w / scale).to(torch.int8).contiguous(), scale


def _int8_product(x: Any, packed: tuple[Any, Any], bias: Any = None) -> Any:
    """``x @ w (+ bias)`` for 2-D ``x`` against :func:`_int8_columns`' ``w``: each row of ``x``
    quantised with its own scale, so a row's answer never depends on the other rows (the
    same alone or batched), then an int8 x int8 -> int32 product (``torch._int_mm``)."""
    import torch

    weights, col_scale = packed
    row_scale = x.abs().amax(1, keepdim=True).clamp_(min=1e-12) / 127.0
    out = torch._int_mm(torch.round(x / row_scale).to(torch.int8), weights).float()
    scale = row_scale * col_scale
    return out.mul_(scale) if bias is None else torch.addcmul(bias, out, scale)


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
        # (C, V), laid out for ``hidden @ head``: read row by row. The tied embedding's
        # transposed view made a one-row product stride across all of its 3 MB, 3x slower
        # once other work has evicted it from the cache (issue 17).
        self.head = model.lm_head.weight.detach().T.contiguous()
        self._np: tuple[Any, ...] | None = None
        """numpy views of the weights, for :meth:`step` (made on its first call)."""
        self.int8: list[tuple[Any, ...]] | None = None
        """Per layer the int8 copies of its four products (:meth:`quantize`)."""
        self.head_int8: tuple[Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # a copy makes its own views of its own weights (:meth:`step`)
        return {**self.__dict__, "_np": None}

    def quantize(self) -> None:
        """Run every matrix product (the blocks' four and the head) in int8: weights with a
        scale per output column, each activation row with its own (:func:`_int8_product`).
        On this CPU it takes ~20% off a keystroke's CPU (BENCHMARKS, "Tab under
        concurrency"); logits move by ~1% of their largest magnitude, and 1,998 of 2,000
        held-out greedy decisions stayed the same. Float32 stays for the KV cache,
        attention, layer norms and softmax, and for the one-row steps of the LM's own line
        (``int8=False`` in the calls: there quantising costs more than it saves)."""
        self.int8 = [tuple(_int8_columns(w) for w in (aw, pw, fw, qw))
                     for (_, _, aw, _, pw, _, _, _, fw, _, qw, _) in self.layers]
        self.head_int8 = _int8_columns(self.head)

    def forward(self, ids: Any, past: list | None, int8: bool = True) -> tuple[Any, list]:
        """ids (B, T) after ``past`` (per layer (k, v) of (B, H, P, D)) -> final hidden (B, T, C).
        ``int8``: through the int8 copies when the pass has them (:meth:`quantize`)."""
        torch = self.torch
        T = ids.shape[1]
        P = 0 if past is None else past[0][0].shape[2]
        x = self.wte[ids] + self.wpe[P : P + T]  # (B, T, C)
        mask = None
        if past is not None and T > 1:
            mask = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        return self._blocks(x, past, mask, causal=past is None and T > 1, int8=int8)

    def _blocks(self, x: Any, past: list | None, mask: Any, causal: bool = False,
                int8: bool = True) -> tuple[Any, list]:
        """The transformer blocks over embedded tokens x (B, T, C) after ``past``, attention
        limited by ``mask`` (or causal): final hidden (B, T, C) and per layer the (k, v)
        of the past and these tokens."""
        torch, F = self.torch, self.F
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        new_past = []
        packed = self.int8 if int8 else None

        def mm(bias: Any, a: Any, w: Any, layer: int, j: int) -> Any:
            return torch.addmm(bias, a, w) if packed is None else _int8_product(a, packed[layer][j], bias)

        for i, (l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, qw, qb) in enumerate(self.layers):
            h = F.layer_norm(x, (C,), l1w, l1b, self.eps)
            q, k, v = mm(ab, h.reshape(B * T, C), aw, i, 0).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            if past is not None:
                k = torch.cat([past[i][0], k], dim=2)
                v = torch.cat([past[i][1], v], dim=2)
            new_past.append((k, v))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
            a = a.transpose(1, 2).reshape(B * T, C)
            x = x + mm(pb, a, pw, i, 1).view(B, T, C)
            h = F.layer_norm(x, (C,), l2w, l2b, self.eps).reshape(B * T, C)
            h = F.gelu(mm(fb, h, fw, i, 2), approximate="tanh")
            x = x + mm(qb, h, qw, i, 3).view(B, T, C)
        return F.layer_norm(x, (C,), self.lnf[0], self.lnf[1], self.eps), new_past

    def forward_rows(self, rows: Sequence[tuple[Sequence[Sequence[int]], Any]], keep: bool = False,
                     shared: Sequence[bool] | None = None, int8: bool = True) -> tuple[Any, list[Any]]:
        """Several requests' tokens in one pass, each row after its own KV cache (or none).

        A row is ``(segments, past)``: every segment starts right after ``past`` (same
        positions) and sees the past and its own earlier tokens, not the other segments —
        one request's copy candidates, scored side by side. With ``shared[b]`` row b's first
        segment is a prefix of all the others: they start after it and see it too — a new
        prompt's tokens and the candidates that follow it, in one pass. Rows are
        right-padded to one length, the pasts to one length, and a mask keeps every token to
        what it may see, so the answers equal one pass per segment up to float rounding, and
        concurrent requests share every matrix product and every op's overhead (issue 17).

        Returns the final hidden states (B, T, C), segments laid end to end in each row,
        and with ``keep`` the KV cache of each one-segment row, and of each shared row's
        prefix, extended by its tokens."""
        torch = self.torch
        B = len(rows)
        shared = list(shared) if shared is not None else [False] * B
        if B == 1 and len(rows[0][0]) == 1:  # one sequence: no padding, no mask to build
            segments, past = rows[0]
            hidden, extended = self.forward(torch.tensor([list(segments[0])]), past, int8)
            return hidden, [extended if keep else None]
        flat: list[list[int]] = []
        segs: list[list[int]] = []
        pos: list[list[int]] = []
        plens = [0 if past is None else int(past[0][0].shape[2]) for _, past in rows]
        for (segments, _), P, prefixed in zip(rows, plens, shared):
            toks: list[int] = []
            seg: list[int] = []
            at: list[int] = []
            for s, part in enumerate(segments):
                toks.extend(part)
                seg.extend([s] * len(part))
                start = P + len(segments[0]) if prefixed and s else P
                at.extend(range(start, start + len(part)))
            flat.append(toks)
            segs.append(seg)
            pos.append(at)
        T, Pm = max(len(t) for t in flat), max(plens)
        pad = [T - len(t) for t in flat]
        ids = torch.tensor([t + [0] * n for t, n in zip(flat, pad)])
        seg_t = torch.tensor([g + [-1] * n for g, n in zip(segs, pad)])
        pos_t = torch.tensor([q + [0] * n for q, n in zip(pos, pad)]).clamp_(max=self.max_positions - 1)
        x = self.wte[ids] + self.wpe[pos_t]  # (B, T, C)
        ar = torch.arange(T)
        own = (seg_t[:, None, :] == seg_t[:, :, None]) & (ar[None, None, :] <= ar[None, :, None])
        own |= torch.eye(T, dtype=torch.bool)  # a padding token sees itself: no empty row
        if any(shared):  # a shared row's later segments see its first one
            own |= torch.tensor(shared)[:, None, None] & (seg_t[:, None, :] == 0) & (seg_t[:, :, None] > 0)
        if Pm:
            seen = torch.arange(Pm)[None, None, :] < torch.tensor(plens)[:, None, None]
            mask = torch.cat([seen.expand(B, T, Pm), own], 2)[:, None]  # (B, 1, T, Pm + T)
            pasts = self._padded([past for _, past in rows], Pm)
        else:
            mask, pasts = own[:, None], None
        hidden, kv = self._blocks(x, pasts, mask, int8=int8)
        new: list[Any] = [None] * B
        if keep:
            for b, ((segments, past), n) in enumerate(zip(rows, (len(t) for t in flat))):
                if shared[b]:
                    n = len(segments[0])
                elif len(segments) != 1:
                    continue
                mine = [(k[b : b + 1, :, Pm : Pm + n], v[b : b + 1, :, Pm : Pm + n]) for k, v in kv]
                new[b] = mine if past is None else \
                    [(torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2))
                     for i, (k, v) in enumerate(mine)]
        return hidden, new

    def _padded(self, pasts: list[Any], P: int) -> list[tuple[Any, Any]]:
        """Per layer (k, v) of (B, H, P, D): each row's cache, zero-padded at the end."""
        torch = self.torch
        B = len(pasts)
        if pasts[0] is not None and all(p is pasts[0] for p in pasts):  # one request's rows
            return [(k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1)) for k, v in pasts[0]]
        pad_sequence = torch.nn.utils.rnn.pad_sequence
        H, D = self.n_head, self.wte.shape[1] // self.n_head
        empty = torch.zeros(0, H, D)
        out = []
        for i in range(len(self.layers)):
            ks = [empty if p is None else p[i][0][0].transpose(0, 1) for p in pasts]  # (P_b, H, D)
            vs = [empty if p is None else p[i][1][0].transpose(0, 1) for p in pasts]
            out.append((pad_sequence(ks, batch_first=True).transpose(1, 2),
                        pad_sequence(vs, batch_first=True).transpose(1, 2)))
        return out

    def step(self, rows: Sequence[tuple[int, Any]]) -> list[tuple[int, float, list[tuple[Any, Any]]]]:
        """One greedy token after each row's last token and KV cache (per layer (k, v),
        as (1, H, P, D) tensors from a pass or (H, P, D) arrays from an earlier step): per
        row the best token, its log-probability and the cache extended by the row's token.

        The same maths as :meth:`forward` then :meth:`logits` in float32, in numpy: a
        one-token step is ~60 small products and element-wise ops, where torch's dispatch
        costs more than the arithmetic; numpy does a step in about half the CPU (issue 17).
        Answers agree with the torch pass to float rounding (~1e-6). BLAS must run on one
        thread (:meth:`TabLM.load` sets it): a multi-threaded product this small is slower."""
        import math

        import numpy as np

        if self._np is None:
            self._np = ([tuple(t.numpy() for t in layer) for layer in self.layers],
                        tuple(t.numpy() for t in self.lnf), self.head.numpy(),
                        self.wte.numpy(), self.wpe.numpy())
        layers, (fw_, fb_), head, wte, wpe = self._np
        H = self.n_head
        C = wte.shape[1]
        D, eps, c = C // H, self.eps, math.sqrt(2.0 / math.pi)
        scale = np.float32(1.0 / math.sqrt(D))
        add = np.add.reduce

        def norm(x: Any, w: Any, b: Any) -> Any:  # layer norm of one row (C,)
            d = x - add(x) / C
            d *= w * np.float32(1.0 / math.sqrt(float(d @ d) / C + eps))
            d += b
            return d

        out = []
        for token, past in rows:
            kv = [(np.asarray(k), np.asarray(v)) for k, v in past]
            kv = [(k[0], v[0]) if k.ndim == 4 else (k, v) for k, v in kv]
            x = wte[token] + wpe[kv[0][0].shape[1]]
            new = []
            for (l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, qw, qb), (pk, pv) in zip(layers, kv):
                qkv = norm(x, l1w, l1b) @ aw
                qkv += ab
                k = np.concatenate([pk, qkv[C : 2 * C].reshape(H, 1, D)], 1)
                v = np.concatenate([pv, qkv[2 * C :].reshape(H, 1, D)], 1)
                new.append((k, v))
                s = qkv[:C].reshape(H, 1, D) @ k.transpose(0, 2, 1)  # (H, 1, P + 1)
                s *= scale
                s = np.exp(s - np.maximum.reduce(s, 2)[..., None])
                s /= add(s, 2)[..., None]
                x = x + (s @ v).reshape(C) @ pw
                x += pb
                h = norm(x, l2w, l2b) @ fw
                h += fb
                h = h * (1.0 + np.tanh(c * (h + 0.044715 * h * h * h)))
                h *= 0.5
                x += h @ qw
                x += qb
            logits = norm(x, fw_, fb_) @ head
            best = int(logits.argmax())
            out.append((best, -math.log(float(add(np.exp(logits - logits[best])))), new))
        return out

    def logits(self, hidden: Any, int8: bool = True) -> Any:
        if self.head_int8 is None or not int8:
            return hidden @ self.head
        rows = _int8_product(hidden.reshape(-1, hidden.shape[-1]), self.head_int8)
        return rows.view(*hidden.shape[:-1], rows.shape[-1])


class _HFModel:
    """The same interface through ``transformers`` for any other causal LM."""

    def __init__(self, model: Any) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.max_positions = getattr(model.config, "max_position_embeddings", None) or \
            getattr(model.config, "n_positions", 2048)

    def forward(self, ids: Any, past: Any, int8: bool = True) -> tuple[Any, Any]:
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

    def forward_rows(self, rows: Sequence[tuple[Sequence[Sequence[int]], Any]], keep: bool = False,
                     shared: Sequence[bool] | None = None, int8: bool = True) -> tuple[Any, list[Any]]:
        """:meth:`_FastGPT2.forward_rows` one segment at a time (transformers' caches do not
        pad): the same answers, none of the sharing (and no shared prefixes)."""
        if shared is not None and any(shared):
            raise ValueError("shared prefixes need the built-in GPT-2 pass (_FastGPT2)")
        torch = self.torch
        outs, new = [], []
        for segments, past in rows:
            parts = []
            cache = None
            for part in segments:
                hidden, cache = self.forward(torch.tensor([list(part)]), past)
                parts.append(hidden[0])
            outs.append(torch.cat(parts))
            new.append(cache if keep and len(segments) == 1 else None)
        return torch.nn.utils.rnn.pad_sequence(outs, batch_first=True), new

    def logits(self, hidden: Any, int8: bool = True) -> Any:
        return self.model.get_output_embeddings()(hidden)


def _gpt2_byte_level(path: Path) -> bool:
    """Does this tokenizer split words by GPT-2's rule with nothing normalised first (what
    :meth:`TabLM._encode` relies on to encode a window's settled lines apart)?"""
    spec = json.loads(path.read_text(encoding="utf-8"))
    pre = spec.get("pre_tokenizer") or {}
    return spec.get("normalizer") is None and pre.get("type") == "ByteLevel" and \
        bool(pre.get("use_regex", True)) and (spec.get("model") or {}).get("type") == "BPE"


class TabLM:
    """A loaded checkpoint: tokenizer + model, warm, one thread by default."""

    def __init__(self, path: str | Path, *, context_tokens: int = 64, gen_tokens: int = 6,
                 score_tokens: int = 12, threads: int = 1, cache: int = 0, anchor: int = 16,
                 int8: bool = False) -> None:
        self.path = Path(path)
        self.int8 = int8
        """The LM's matrix products in int8 (:meth:`_FastGPT2.quantize`; GPT-2 checkpoints only)."""
        self.anchor = anchor
        """Prompt starts move in steps of this many tokens (0: a sliding window); see :meth:`_prompt`."""
        self._cache = _Caches.of_size(cache)
        """Prompt states kept for reuse (0: none); see :class:`_Caches`."""
        self.context_tokens = context_tokens
        self.gen_tokens = gen_tokens
        self.score_tokens = score_tokens
        self.threads = threads
        self._runs_lock = threading.Lock()
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
            from threadpoolctl import threadpool_limits

            torch.set_num_threads(self.threads)
            threadpool_limits(self.threads, user_api="blas")  # numpy's too (_FastGPT2.step)
        self.tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self._split_lines = _gpt2_byte_level(self.path / "tokenizer.json")
        self._settled: _LRU[list[int]] = _LRU(256)
        model = AutoModelForCausalLM.from_pretrained(str(self.path), local_files_only=True)
        model.eval()
        self.model = model
        self.net: _FastGPT2 | _HFModel = _FastGPT2(model) if model.config.model_type == "gpt2" else _HFModel(model)
        if self.int8:
            if not isinstance(self.net, _FastGPT2):
                raise ValueError(f"int8 needs a GPT-2 checkpoint (the built-in pass); {self.path} "
                                 f"is {model.config.model_type!r}: turn int8 off for it")
            self.net.quantize()
        room = int(self.net.max_positions or 2048) - self.score_tokens - self.gen_tokens - 2
        self.context_tokens = min(self.context_tokens, room)
        vocab = self.tokenizer.get_vocab_size()
        self.token_text = np.array([self.tokenizer.decode([i]) for i in range(vocab)], dtype=object)
        self.newline_tokens = np.array(["\n" in t for t in self.token_text])
        self._by_text = sorted(range(vocab), key=lambda i: self.token_text[i])
        self._sorted_text = [self.token_text[i] for i in self._by_text]
        self.hidden_size = int(model.config.hidden_size)
        self._allowed = lru_cache(maxsize=4096)(self._allowed_uncached)
        self._loaded = True
        return self

    def weights_changed(self) -> None:
        """The model's weights were changed in place (an LM learning where it is deployed:
        ``benchmarks/loop_learn.py --lm``): rebuild the fast pass over them — its output head
        is a *copy* (the other tensors are views of the model's own) — and forget every
        prompt state, score and line kept from the old weights (:class:`_Caches`)."""
        self.load()
        if isinstance(self.net, _FastGPT2):
            self.net = _FastGPT2(self.model)
            if self.int8:  # the int8 copies are of the old weights
                self.net.quantize()
        self._cache = _Caches.of_size(self._cache.prompts.size)

    def cache_stats(self) -> dict[str, int]:
        """Hits and misses of the reuse caches (prompts, scored sequences, LM lines)."""
        return self._cache.stats()

    def _allowed_uncached(self, tail: str) -> Any:
        """The tokens whose text starts with ``tail``: a run of the texts in sorted order,
        found by bisection (issue 17: a scan of the whole vocabulary in Python cost ~6 ms,
        on one keystroke in ten, a cache miss each)."""
        import numpy as np

        if not tail:
            return None
        texts = self._sorted_text
        lo = bisect.bisect_left(texts, tail)
        last = ord(tail[-1])
        if last < sys.maxunicode:  # every text with the prefix sorts before the next prefix
            hi = bisect.bisect_left(texts, tail[:-1] + chr(last + 1), lo)
        else:
            hi = lo
            while hi < len(texts) and texts[hi].startswith(tail):
                hi += 1
        mask = np.zeros(len(texts), dtype=bool)
        mask[self._by_text[lo:hi]] = True
        return mask

    def _prompt(self, left: str) -> tuple[list[int], str]:
        """The prompt's token ids and the ``tail`` it leaves for the continuation.

        With ``anchor`` > 0 (the default) the prompt's start stays put while a person types
        on: the text window starts at a line start found from a position rounded down to
        :data:`_ANCHOR_CHARS`, and tokens are dropped from the front in steps of ``anchor``
        (so a prompt holds ``context_tokens - anchor + 1`` to ``context_tokens`` tokens).
        A keystroke then leaves the previous prompt as a prefix of the new one, and
        :meth:`_prompt_states` runs only the new tokens on the kept KV cache. ``anchor`` 0
        keeps the last ``context_tokens`` tokens exactly (a sliding window: no reuse)."""
        start = max(0, len(left) - self.context_tokens * 6)
        if self.anchor and start:
            start -= start % _ANCHOR_CHARS
            line = left.find("\n", start, start + _ANCHOR_CHARS)
            start = line + 1 if line >= 0 else start
        window = left[start:]
        ids, last = self._encode(window)
        if not ids:
            return [], ""
        tail = window[last:]
        ids = ids[:-1]
        over = len(ids) - self.context_tokens
        if over > 0:
            step = self.anchor or 1
            ids = ids[-(-over // step) * step :]  # ``over`` rounded up to a multiple of ``step``
        return ids, tail

    def _encode(self, window: str) -> tuple[list[int], int]:
        """``window``'s token ids and where its last token starts, the ids of its settled
        lines kept (issue 17): while a person types on a line, the text before the newline
        that starts it stays the same, and encoding it again cost ~0.45 ms a keystroke once
        the model's passes had pushed the tokenizer out of the CPU's caches. A byte-level
        BPE with GPT-2's split rule never joins across a newline that follows a character
        other than whitespace (no pattern runs from such a character into whitespace, and a
        newline never joins the word after it), so encoding the two parts apart gives the
        same ids as encoding the whole."""
        cut = window.rfind("\n") if self._split_lines else -1
        while cut > 0 and window[cut - 1].isspace():
            cut = window.rfind("\n", 0, cut)
        if cut <= 0:
            enc = self.tokenizer.encode(window)
            return enc.ids, enc.offsets[-1][0] if enc.ids else 0
        head = window[:cut]
        ids = self._settled.get(head)
        if ids is None:
            ids = self._settled.put(head, self.tokenizer.encode(head).ids)
        enc = self.tokenizer.encode(window[cut:])
        return ids + enc.ids, cut + enc.offsets[-1][0]

    def analyze(self, left: str, candidates: list[Candidate], *, generate: bool = True) -> LMAnalysis:
        """Hidden state, the LM's own candidate, and token scores for ``candidates`` (in place)."""
        return self.analyze_many([(left, candidates, generate)])[0]

    def analyze_many(self, items: Sequence[tuple[str, list[Candidate], bool]]) -> list[LMAnalysis]:
        """:meth:`analyze` for several requests at once (``(left, candidates, generate)`` each).

        Each of the three steps is one pass for all of them (:meth:`_FastGPT2.forward_rows`):
        the prompts (the new ones, then those extending a kept prompt), every request's copy
        candidates, and each step of the LM lines being decoded, so concurrent requests share
        the matrix products and the per-op overhead (issue 17). The answers equal
        one-at-a-time answers up to float rounding.
        """
        import torch

        self.load()
        prompts = [self._prompt(left) for left, _, _ in items]
        eos = self.model.config.eos_token_id or 0
        keys = [tuple(ids) if ids else (eos,) for ids, _ in prompts]  # nothing typed: end-of-text
        scoring = [(cands, tail, key) for (_, cands, _), (_, tail), key in zip(items, prompts, keys)
                   if cands]
        encoded = [[self.tokenizer.encode(tail + c.text) for c in cands] for cands, tail, _ in scoring]
        seqs = [[tuple(e.ids[: self.score_tokens]) for e in row] for row in encoded]
        scores: dict[tuple, list[float]] = {}
        missing: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for (_, _, key), row in zip(scoring, seqs):
            for seq in row:
                if (key, seq) in scores or seq in missing.get(key, ()):
                    continue
                hit = self._cache.scores.get((key, seq)) if seq else []
                if hit is not None:
                    scores[key, seq] = hit
                else:
                    missing.setdefault(key, []).append(seq)
        with torch.inference_mode():
            states = self._prompt_states(keys, missing, scores)
            outs = [LMAnalysis(hidden=st.hidden.float().numpy().copy(), lm_candidate=None,
                               prompt_tokens=len(key), tail=tail)
                    for st, key, (_, tail) in zip(states, keys, prompts)]
            state_of = dict(zip(keys, states))
            todo = {key: (state_of[key], [seq for seq in row if (key, seq) not in scores])
                    for key, row in missing.items()}
            todo = {key: job for key, job in todo.items() if job[1]}
            if todo:
                scores.update(self._scored(todo))
            for (cands, tail, key), row, enc_row in zip(scoring, seqs, encoded):
                self._attach(cands, tail, [scores[key, seq] for seq in row], enc_row)
            wanted = [i for i, (_, _, generate) in enumerate(items) if generate]
            lines = self._generated_many([(states[i], keys[i], outs[i].tail, len(items[i][0]))
                                          for i in wanted])
            for i, line in zip(wanted, lines):
                outs[i].lm_candidate = line
        return outs

    # -- the three LM steps, each answered from the cache when it can ---------------------
    def _prompt_states(self, keys: list[tuple[int, ...]],
                       score: dict[tuple[int, ...], list[tuple[int, ...]]] | None = None,
                       scores: dict[tuple, list[float]] | None = None) -> list[_PromptState]:
        """Each prompt's last hidden state, KV cache and next-token log-probabilities: from
        the cache, or computed on a kept prompt's KV cache when one shares its start (the
        person typed on: only the new tokens run), or from scratch; one pass for each kind.

        ``score``: sequences to score after a prompt. Those of a prompt this computes run in
        the same pass, after its tokens (``forward_rows``' shared rows), and their token
        log-probabilities go into ``scores`` and the cache: one pass and one product with
        the output head instead of two of each (issue 17)."""
        import torch

        out: list[_PromptState | None] = [self._cache.prompts.get(k) for k in keys]
        reuse = isinstance(self.net, _FastGPT2)  # transformers' caches are not cut to a prefix
        todo: dict[tuple[int, ...], tuple[tuple[int, ...], Any, int]] = {}  # key -> (run, past, kept)
        for key, state in zip(keys, out):
            if state is not None or key in todo:
                continue
            prefix = self._cache.prefix_of(key) if reuse else None
            if prefix is None:
                todo[key] = (key, None, 0)
            else:
                same, base = prefix
                todo[key] = (key[same:], [(k[:, :, :same], v[:, :, :same]) for k, v in base.past], same)
        fresh: dict[tuple[int, ...], _PromptState] = {}
        for extending in (False, True):
            group = [(key, run, past, same) for key, (run, past, same) in todo.items()
                     if bool(same) == extending]
            if not group:
                continue
            merged = [list(score.get(key, ())) if score is not None and reuse else []
                      for key, _, _, _ in group]
            longer = [[seq for seq in seqs if len(seq) > 1] for seqs in merged]
            rows = [([run] + [seq[:-1] for seq in more], past)
                    for (_, run, past, _), more in zip(group, longer)]
            shared = [bool(more) for more in longer]
            hidden, pasts = self.net.forward_rows(rows, keep=True,
                                                  shared=shared if any(shared) else None)
            n = len(group)
            at_b, at_t = list(range(n)), [len(run) - 1 for _, run, _, _ in group]
            targets: list[int] = []
            for b, ((_, run, _, _), more) in enumerate(zip(group, longer)):
                offset = len(run)
                for seq in more:  # position j of a sequence predicts its token j + 1
                    at_b.extend([b] * (len(seq) - 1))
                    at_t.extend(range(offset, offset + len(seq) - 1))
                    targets.extend(seq[1:])
                    offset += len(seq) - 1
            picked = hidden[torch.tensor(at_b), torch.tensor(at_t)]
            logp = torch.log_softmax(self.net.logits(picked).float(), dim=-1)  # (n + R, V)
            last, first = picked[:n], logp[:n]
            rest: Iterator[float] = iter(())
            if targets:
                last, first = last.clone(), first.clone()  # keep no (n + R, V) tensor alive
                rest = iter(logp[n:].gather(1, torch.tensor(targets)[:, None])[:, 0].tolist())
            for b, (key, _, _, same) in enumerate(group):
                if same:
                    self._cache.extended += 1
                    self._cache.tokens_saved += same
                fresh[key] = self._cache.keep_prompt(key, _PromptState(last[b], pasts[b], first[b]))
                for seq in merged[b]:
                    lps = [float(first[b, seq[0]])] + [next(rest) for _ in seq[1:]]
                    if scores is not None:
                        scores[key, seq] = self._cache.scores.put((key, seq), lps)
        return [state if state is not None else fresh[key] for key, state in zip(keys, out)]

    @staticmethod
    def _attach(cands: list[Candidate], tail: str, row: list[list[float]], enc_row: list[Any]) -> None:
        """Each candidate's token log-probabilities and where each token ends in its text,
        from its sequence's scores (``tail`` re-spelled: tokens inside it are dropped)."""
        for c, scored, enc in zip(cands, row, enc_row):
            lps, ends = [], []
            for lp, span in zip(scored, enc.offsets):
                end = span[1] - len(tail)
                if end <= 0:
                    continue  # a token inside the already-typed tail
                lps.append(lp)
                ends.append(min(end, len(c.text)))
            c.token_logprobs, c.token_ends = lps, ends

    def _scored(self, todo: dict[tuple[int, ...], tuple[_PromptState, list[tuple[int, ...]]]]
                ) -> dict[tuple, list[float]]:
        """One pass for every prompt's sequences (a row per prompt, a segment per sequence):
        each sequence's tokens' log-probabilities (token 0's from the prompt's last state),
        also cached."""
        import torch

        scored = {(key, seq): [float(state.first_logp[seq[0]])]
                  for key, (state, seqs) in todo.items() for seq in seqs}
        rows, owners = [], []
        for key, (state, seqs) in todo.items():
            longer = [seq for seq in seqs if len(seq) > 1]  # the last token predicts nothing we score
            if longer:
                rows.append(([seq[:-1] for seq in longer], state.past))
                owners.append((key, longer))
        if rows:
            hidden, _ = self.net.forward_rows(rows)  # (B, T, C)
            at_b, at_t, targets, whose = [], [], [], []
            for b, (key, longer) in enumerate(owners):
                offset = 0
                for seq in longer:  # position j of a segment predicts its token j + 1
                    for j in range(len(seq) - 1):
                        at_b.append(b)
                        at_t.append(offset + j)
                        targets.append(seq[j + 1])
                        whose.append((key, seq))
                    offset += len(seq) - 1
            picked_hidden = hidden[torch.tensor(at_b), torch.tensor(at_t)]
            logp = torch.log_softmax(self.net.logits(picked_hidden).float(), dim=-1)  # (R, V)
            picked = logp.gather(1, torch.tensor(targets)[:, None])[:, 0].tolist()
            for owner, lp in zip(whose, picked):
                scored[owner].append(lp)
        return {owner: self._cache.scores.put(owner, lps) for owner, lps in scored.items()}

    def _generated_many(self, jobs: list[tuple[_PromptState, tuple[int, ...], str, int]]
                        ) -> list[Candidate | None]:
        """Each job's LM line, decoded greedily: the first token must re-spell ``tail``; the
        rest of the run depends only on the prompt and that token, so it is shared (and kept)
        by every request that picks the same first token after the same prompt. The runs
        still going take each step together, in one pass."""
        import numpy as np
        import torch

        lines: list[_Line | None] = []
        for state, key, tail, cursor in jobs:
            allowed = self._allowed(tail)
            logits = state.first_logp if allowed is None else \
                state.first_logp.masked_fill(torch.from_numpy(~allowed), float("-inf"))
            first = torch.log_softmax(logits, dim=-1)
            t0 = int(torch.argmax(first))
            if not np.isfinite(float(first[t0])):
                lines.append(None)  # no token re-spells the tail
                continue
            run = self._cache.lines.get((key, t0)) or self._cache.lines.put((key, t0), _Run(state.past, t0))
            lines.append(_Line(run, tail, cursor, float(first[t0])))
        for step in range(self.gen_tokens):
            going = [line for line in lines if line is not None and not line.done]
            if not going:
                break
            if step:
                self._extend({id(line.run): line.run for line in going}.values(), step)
            for line in going:
                line.take(step, self.token_text)
        return [line.candidate() if line is not None else None for line in lines]

    def _extend(self, runs: Iterable[_Run], step: int) -> None:
        """Decode the next token of every run that has not reached ``step`` yet, in one call
        (:meth:`_FastGPT2.step`; one batched pass for other models)."""
        import torch

        with self._runs_lock:  # runs are shared between requests (and worker threads)
            short = [run for run in runs if len(run.tokens) <= step]
            if not short:
                return
            if isinstance(self.net, _FastGPT2):  # float32 in numpy: see _FastGPT2.step
                for run, (tok, lp, past) in zip(short, self.net.step([(run.tokens[-1], run.past)
                                                                        for run in short])):
                    run.tokens.append(tok)
                    run.logprobs.append(lp)
                    run.past = past
                return
            # float32 here: a step is a row or two, where int8's quantising costs more than
            # it saves (always float32 here, so a line never depends on its batch)
            hidden, pasts = self.net.forward_rows([([[run.tokens[-1]]], run.past) for run in short],
                                                  keep=True, int8=False)
            logp = torch.log_softmax(self.net.logits(hidden[:, 0], int8=False).float(), dim=-1)  # (B, V)
            best = torch.argmax(logp, dim=-1)
            picked = logp.gather(1, best[:, None])[:, 0].tolist()
            for run, tok, lp, past in zip(short, best.tolist(), picked, pasts):
                run.tokens.append(int(tok))
                run.logprobs.append(float(lp))
                run.past = past


class _Run:
    """Greedy decoding after one prompt from a given first token, extended (by
    :meth:`TabLM._extend`) only as far as some request reads it. ``past`` is the prompt's
    KV cache until the first step, then the step's (:meth:`_FastGPT2.step`)."""

    def __init__(self, past: Any, first: int) -> None:
        self.past = past
        self.tokens = [first]
        self.logprobs = [0.0]  # step 0's depends on the request's tail: not kept


class _Line:
    """One request's LM line being read off a run: stops at the end of the line."""

    def __init__(self, run: _Run, tail: str, cursor: int, first_logprob: float) -> None:
        self.run, self.tail, self.cursor, self.first_logprob = run, tail, cursor, first_logprob
        self.pieces: list[str] = []
        self.lps: list[float] = []
        self.ends: list[int] = []
        self.text_len = -len(tail)
        self.done = False

    def take(self, step: int, token_text: Any) -> None:
        tok = self.run.tokens[step]
        lp = self.first_logprob if step == 0 else self.run.logprobs[step]
        piece = str(token_text[tok])
        stop = piece.find("\n", max(0, -self.text_len) if self.text_len < 0 else 0)
        if stop >= 0 and self.text_len + stop >= 0:
            piece = piece[:stop]
            if self.text_len + len(piece) > 0:
                self.pieces.append(piece)
                self.lps.append(lp)
                self.ends.append(self.text_len + len(piece))
            self.done = True
            return
        self.pieces.append(piece)
        self.text_len += len(piece)
        if self.text_len > 0:
            self.lps.append(lp)
            self.ends.append(self.text_len)

    def candidate(self) -> Candidate | None:
        text = "".join(self.pieces)[len(self.tail) :]
        if not text.strip():
            return None
        return Candidate(text=text, source="lm", start=self.cursor, end=self.cursor,
                         token_logprobs=self.lps, token_ends=self.ends)
