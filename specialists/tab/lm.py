"""The causal LM behind Tab: loads any local ``AutoModelForCausalLM`` checkpoint, scores
candidates, writes its own, and hands the policy its last hidden state.

One call per request, :meth:`TabLM.analyze`:

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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from specialists.tab.context_copy import Candidate

__all__ = ["TabLM", "LMAnalysis"]


@dataclass
class LMAnalysis:
    hidden: Any  # (C,) float32 numpy: final hidden state at the last prompt token
    lm_candidate: Candidate | None
    prompt_tokens: int = 0
    tail: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


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
                 score_tokens: int = 12, threads: int = 1) -> None:
        self.path = Path(path)
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
        import numpy as np
        import torch

        self.load()
        ids, tail = self._prompt(left)
        if not ids:  # nothing to condition on: start from the end-of-text token
            ids = [self.model.config.eos_token_id or 0]
        with torch.inference_mode():
            hidden, past = self.net.forward(torch.tensor([ids]), None)
            last = hidden[:, -1]  # (1, C)
            first_logp = torch.log_softmax(self.net.logits(last).float(), dim=-1)[0]  # (V,)
            out = LMAnalysis(hidden=last[0].float().numpy().copy(), lm_candidate=None,
                             prompt_tokens=len(ids), tail=tail)
            if candidates:
                self._score(candidates, tail, past, first_logp)
            if generate:
                out.lm_candidate = self._generate(first_logp, past, tail, len(left))
        return out

    def _score(self, candidates: list[Candidate], tail: str, past: Any, first_logp: Any) -> None:
        import torch

        seqs, spans = [], []
        for c in candidates:
            enc = self.tokenizer.encode(tail + c.text)
            seqs.append(enc.ids[: self.score_tokens])
            spans.append(enc.offsets[: self.score_tokens])
        width = max(len(s) for s in seqs)
        if width == 0:
            return
        batch = torch.tensor([s + [0] * (width - len(s)) for s in seqs])  # (N, W) right-padded
        if isinstance(past, list):
            past = [(k.expand(len(seqs), -1, -1, -1), v.expand(len(seqs), -1, -1, -1)) for k, v in past]
        hidden, _ = self.net.forward(batch, past)
        # the prompt's last state predicts token 0; position j predicts token j + 1
        logp = torch.log_softmax(self.net.logits(hidden).float(), dim=-1)  # (N, W, V)
        for n, c in enumerate(candidates):
            lps, ends = [], []
            for j, tok in enumerate(seqs[n]):
                end = spans[n][j][1] - len(tail)
                if end <= 0:
                    continue  # a token inside the already-typed tail
                lp = first_logp[tok] if j == 0 else logp[n, j - 1, tok]
                lps.append(float(lp))
                ends.append(min(end, len(c.text)))
            c.token_logprobs, c.token_ends = lps, ends

    def _generate(self, first_logp: Any, past: Any, tail: str, cursor: int) -> Candidate | None:
        import numpy as np
        import torch

        logits = first_logp
        allowed = self._allowed(tail)
        if allowed is not None:
            logits = logits.masked_fill(torch.from_numpy(~allowed), float("-inf"))
        pieces: list[str] = []
        lps: list[float] = []
        ends: list[int] = []
        text_len = -len(tail)
        for _ in range(self.gen_tokens):
            logp = torch.log_softmax(logits, dim=-1)
            tok = int(torch.argmax(logp))
            piece = str(self.token_text[tok])
            if not np.isfinite(float(logp[tok])):
                break
            stop = piece.find("\n", max(0, -text_len) if text_len < 0 else 0)
            if stop >= 0 and text_len + stop >= 0:
                piece = piece[:stop]
                if text_len + len(piece) > 0:
                    pieces.append(piece)
                    lps.append(float(logp[tok]))
                    ends.append(text_len + len(piece))
                break
            pieces.append(piece)
            text_len += len(piece)
            if text_len > 0:
                lps.append(float(logp[tok]))
                ends.append(text_len)
            hidden, past = self.net.forward(torch.tensor([[tok]]), past)
            logits = self.net.logits(hidden[:, -1]).float()[0]
        text = "".join(pieces)[len(tail) :]
        if not text.strip():
            return None
        return Candidate(text=text, source="lm", start=cursor, end=cursor, token_logprobs=lps,
                         token_ends=ends)
