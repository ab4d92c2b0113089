"""Model-based fallback: any causal LM rewrites the file, decoded by speculative edits.

Speculative edits (Cursor's name for it): the merged file is mostly the original file, so the
original's tokens are the draft. Each step feeds the last token plus the next run of draft
tokens in one forward pass, keeps the longest prefix the model would have produced greedily
anyway, and takes the model's own token at the first disagreement. After a disagreement the
draft pointer re-syncs on the last generated n-gram. The output is, by construction, the
plain greedy output token for token (up to floating-point differences between a batched and
a one-token forward pass, which the tests rule out in float64).

torch and transformers are imported only when a model is built or run.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

__all__ = [
    "DecodeStats",
    "ModelApplier",
    "TokenizerLike",
    "greedy_decode",
    "speculative_decode",
]

PROMPT = (
    "Merge the lazy edit sketch into the original file. Markers such as "
    "'... existing code ...' stand for unchanged original code. Output the whole merged file.\n"
    "<original>\n{original}</original>\n<sketch>\n{sketch}</sketch>\n<merged>\n"
)
STOP = "</merged>"


class TokenizerLike(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass
class DecodeStats:
    """What one decode cost: forward passes, draft tokens proposed and accepted, seconds."""

    forward_passes: int = 0
    proposed: int = 0
    accepted: int = 0
    seconds: float = 0.0
    tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _ngram_index(draft: Sequence[int], n_max: int) -> list[dict[tuple[int, ...], list[int]]]:
    index: list[dict[tuple[int, ...], list[int]]] = [{} for _ in range(n_max + 1)]
    for n in range(1, n_max + 1):
        table = index[n]
        for i in range(len(draft) - n + 1):
            table.setdefault(tuple(draft[i:i + n]), []).append(i + n)
    return index


def _resync(index: list[dict[tuple[int, ...], list[int]]], generated: list[int], pointer: int) -> int:
    """Draft position after the longest recent n-gram of the output (nearest ahead first)."""
    for n in range(len(index) - 1, 0, -1):
        if len(generated) < n:
            continue
        hits = index[n].get(tuple(generated[-n:]))
        if hits:
            ahead = [h for h in hits if h >= pointer]
            return ahead[0] if ahead else hits[-1]
    return -1


def _decode(model: Any, prompt_ids: Sequence[int], draft: Sequence[int] | None, max_new_tokens: int,
            stop_ids: set[int], draft_len: int, ngram: int) -> tuple[list[int], DecodeStats]:
    import torch

    stats = DecodeStats()
    started = time.perf_counter()
    device = next(model.parameters()).device
    # transformers 5 renamed ``past_key_values`` to ``cache``; accept either.
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(prompt_ids)], device=device), use_cache=True)
        stats.forward_passes += 1
        cache = _cache_of(out)
        next_tok = int(out.logits[0, -1].argmax())
        generated: list[int] = []
        index = _ngram_index(draft, ngram) if draft else None
        pointer = 0
        while True:
            generated.append(next_tok)
            if next_tok in stop_ids or len(generated) >= max_new_tokens:
                break
            proposal: list[int] = []
            if index is not None and draft is not None:
                if pointer < len(draft) and draft[pointer] == next_tok:
                    pointer += 1
                else:
                    pointer = _resync(index, generated, pointer)
                if pointer >= 0:
                    room = max_new_tokens - len(generated)
                    proposal = list(draft[pointer:pointer + min(draft_len, room)])
                else:
                    pointer = 0
            feed = torch.tensor([[next_tok] + proposal], device=device)
            out = model(input_ids=feed, use_cache=True, **{cache_arg: cache})
            stats.forward_passes += 1
            cache = _cache_of(out)
            preds = out.logits[0].argmax(-1).tolist()  # preds[i]: greedy token after feed[:i+1]
            accepted = 0
            while accepted < len(proposal) and preds[accepted] == proposal[accepted]:
                accepted += 1
            stats.proposed += len(proposal)
            stats.accepted += accepted
            stopped = False
            for tok in proposal[:accepted]:
                generated.append(tok)
                if tok in stop_ids:
                    stopped = True
                    break
            if stopped or len(generated) >= max_new_tokens:
                break
            pointer += accepted
            next_tok = preds[accepted]
            if proposal:
                _crop(cache, len(prompt_ids) + len(generated))
    stats.seconds = time.perf_counter() - started
    stats.tokens = len(generated)
    return generated, stats


def _cache_of(out: Any) -> Any:
    cache = out.get("cache") if hasattr(out, "get") else None
    return cache if cache is not None else out.past_key_values


def _crop(cache: Any, keep: int) -> None:
    """Drop the rejected draft tokens from the KV cache (a negative crop works in both the
    old absolute-length API and the newer tokens-to-remove one)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


def greedy_decode(model: Any, prompt_ids: Sequence[int], max_new_tokens: int,
                  stop_ids: set[int] | None = None) -> tuple[list[int], DecodeStats]:
    """Plain greedy decoding with a KV cache, one token per forward pass."""
    return _decode(model, prompt_ids, None, max_new_tokens, stop_ids or set(), 0, 1)


def speculative_decode(model: Any, prompt_ids: Sequence[int], draft: Sequence[int], max_new_tokens: int,
                       stop_ids: set[int] | None = None, draft_len: int = 24,
                       ngram: int = 3) -> tuple[list[int], DecodeStats]:
    """Greedy decoding that verifies runs of ``draft`` tokens in one forward pass each."""
    return _decode(model, prompt_ids, draft, max_new_tokens, stop_ids or set(), draft_len, ngram)


class _HFTokenizer:
    """Adapts a transformers tokenizer to ``TokenizerLike`` (no special tokens added)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = tokenizer.eos_token_id

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


class ModelApplier:
    """Rewrites the whole file from (original, sketch) with a causal LM, speculatively."""

    def __init__(self, model: Any, tokenizer: TokenizerLike, *, max_new_tokens: int = 8192,
                 draft_len: int = 24, speculative: bool = True) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.draft_len = draft_len
        self.speculative = speculative

    @classmethod
    def from_pretrained(cls, name_or_path: str, *, device: str = "cpu", dtype: str | None = None,
                        **options: Any) -> "ModelApplier":
        """Load any HF causal LM from a local path or cache (never downloads)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs: dict[str, Any] = {"local_files_only": True}
        if dtype:
            kwargs["dtype"] = getattr(torch, dtype)
        model: Any = AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
        model = model.to(device).eval()  # transformers' stubs mistype .to() on the result
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
        return cls(model, _HFTokenizer(tokenizer), **options)

    def rewrite(self, original: str, sketch: str) -> tuple[str, DecodeStats]:
        """The merged file the model writes, and what decoding it cost."""
        prompt = self.tokenizer.encode(PROMPT.format(original=_nl(original), sketch=_nl(sketch)))
        stop: set[int] = set()
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is not None:
            stop.add(int(eos))
        budget = min(self.max_new_tokens, 2 * len(self.tokenizer.encode(original)) + 256)
        if self.speculative:
            ids, stats = speculative_decode(self.model, prompt, self.tokenizer.encode(original) +
                                            self.tokenizer.encode(STOP), budget, stop, self.draft_len)
        else:
            ids, stats = greedy_decode(self.model, prompt, budget, stop)
        text = self.tokenizer.decode([t for t in ids if t not in stop])
        cut = text.find(STOP)
        return (text[:cut] if cut >= 0 else text), stats


def _nl(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"
