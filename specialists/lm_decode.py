"""Greedy and speculative decoding for the small causal LMs (below both specialists).

Speculative edits (Cursor's name for it): an answer that is mostly a known text (the
original file, the editable region) takes that text's tokens as the draft. Each step feeds
the last token plus the next run of draft tokens in one forward pass, keeps the longest
prefix the model would have produced greedily anyway, and takes the model's own token at the
first disagreement. After a disagreement the draft pointer re-syncs on the last generated
n-gram. The output is, by construction, the plain greedy output token for token (up to
floating-point differences between a batched and a one-token forward pass, which the tests
rule out in float64).

The applier's learned fallback (``specialists.apply``) and the Tab specialist's next-edit
model (``specialists.tab.next_edit``) share it; torch is imported only when a model runs.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DecodeStats", "greedy_decode", "speculative_decode"]


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
