"""Model-based fallback: any causal LM rewrites the file, decoded by speculative edits.

The merged file is mostly the original file, so the original's tokens are the draft
(``specialists.lm_decode``: speculative edits, the greedy output token for token).

torch and transformers are imported only when a model is built or run.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from specialists.lm_decode import DecodeStats, greedy_decode, speculative_decode

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
