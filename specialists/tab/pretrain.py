"""Pretrain the Tab base model here: a byte-level BPE tokenizer and a small GPT-2-style LM.

No weights come from a hub. The corpus is the interpreter's standard library plus the
training projects' files (the newest version of each path in their commit data); the test
and dev projects are never read. The recipe is sized for a 2-core CPU within an hour
(CALIBRATION.md: a few M parameters, ~25 minutes); on a GPU the same script runs faster.

    complement tab pretrain --out runs/tab_pretrain --minutes 25

Writes ``tokenizer.json``, ``config.json``, ``model.safetensors`` and ``pretrain.json``
(the figures the model card quotes) into ``--out``.
"""

from __future__ import annotations

import json
import random
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from specialists.lm_recipe import EOS, RecipeArgs, byte_level_bpe, fit, resolve_device, small_gpt2

__all__ = ["PretrainArgs", "corpus_files", "train_tokenizer", "pretrain"]


@dataclass
class PretrainArgs(RecipeArgs):
    out: str = "runs/tab_pretrain"
    """Directory the tokenizer and model are written to (copy them into the shipped
    checkpoint by hand: the policy head must then be retrained on the new LM)."""
    data: str = "../shared/data/commits"
    """Directory of ``NAME.jsonl.gz`` commit files; the training projects' files join the corpus."""
    projects: tuple[str, ...] = ()
    """Projects whose files join the corpus (default: the training split of ``data.SPLIT``)."""
    stdlib: bool = True
    """Add the interpreter's standard library (tests and site-packages excluded)."""
    val_fraction: float = 0.02
    """Share of the corpus's tokens (the first ones, at least four contexts) held out for the validation loss."""
    max_corpus_chars: int = 0
    """Cap on corpus size (0: no cap); tests use a tiny one."""
    extra_files: list[str] = field(default_factory=list)
    """More local source files or directories to read (``*.py``, ``*.js``, ``*.go`` ...)."""


SOURCE_SUFFIXES = (".py", ".js", ".ts", ".go", ".rs", ".java")


def _stdlib_texts() -> Iterator[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        parts = set(path.relative_to(root).parts)
        if parts & {"test", "tests", "site-packages", "idle_test", "lib2to3"}:
            continue
        try:
            yield path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue


def _project_texts(data_dir: str, projects: tuple[str, ...]) -> Iterator[str]:
    from specialists.tab.data import load_pairs

    for name in projects:
        newest: dict[str, tuple[str, str]] = {}
        for pair in load_pairs(Path(data_dir) / f"{name}.jsonl.gz"):
            seen = newest.get(pair.path)
            if seen is None or pair.date > seen[0]:
                newest[pair.path] = (pair.date, pair.after)
        for _, (_, text) in sorted(newest.items()):
            yield text


def _extra_texts(paths: list[str]) -> Iterator[str]:
    for p in paths:
        root = Path(p)
        files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.suffix in SOURCE_SUFFIXES)
        for f in files:
            try:
                yield f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue


def corpus_files(args: PretrainArgs) -> list[str]:
    """The corpus as a list of file texts, shuffled with the seed."""
    from specialists.tab.data import SPLIT

    projects = args.projects or SPLIT["train"]
    texts = list(_project_texts(args.data, tuple(projects))) if args.data else []
    if args.stdlib:
        texts += list(_stdlib_texts())
    texts += list(_extra_texts(args.extra_files))
    random.Random(args.seed).shuffle(texts)
    if args.max_corpus_chars:
        kept, total = [], 0
        for t in texts:
            if total >= args.max_corpus_chars:
                break
            kept.append(t[: args.max_corpus_chars - total])
            total += len(kept[-1])
        texts = kept
    return texts


def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """Byte-level BPE (GPT-2's scheme), so any UTF-8 text encodes without unknowns."""
    return byte_level_bpe(texts, vocab_size)


def _encode(tok, texts: list[str]):
    import numpy as np

    eos = tok.token_to_id(EOS)
    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eos)
    return np.asarray(ids, dtype=np.int32)


def _batch(data, batch_size: int, seq: int, rng, torch):
    import numpy as np

    starts = rng.integers(0, len(data) - seq - 1, size=batch_size)
    x = torch.from_numpy(np.stack([data[s : s + seq] for s in starts]).astype("int64"))
    return x


def _val_loss(model, val, args, torch) -> float:
    import numpy as np

    model.eval()
    seq = args.n_positions
    losses = []
    with torch.no_grad():
        for s in range(0, min(len(val) - seq - 1, 10 * seq * args.batch_size), seq * args.batch_size):
            chunk = [val[s + i * seq : s + (i + 1) * seq] for i in range(args.batch_size)]
            chunk = [c for c in chunk if len(c) == seq]
            if not chunk:
                break
            x = torch.from_numpy(np.stack(chunk).astype("int64")).to(model.device)
            losses.append(model(input_ids=x, labels=x).loss.item())
    model.train()
    return float(sum(losses) / max(1, len(losses)))


def pretrain(args: PretrainArgs) -> dict:
    """Train tokenizer and model; returns the figures written to ``pretrain.json``."""
    import numpy as np
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.time()
    texts = corpus_files(args)
    tok = train_tokenizer(texts, args.vocab_size)
    tok.save(str(out / "tokenizer.json"))
    data = _encode(tok, texts)
    n_val = max(args.n_positions * 4, int(len(data) * args.val_fraction))
    val, train = data[:n_val], data[n_val:]
    prep_s = time.time() - t0

    model = small_gpt2(args, tok)
    model.to(device)  # type: ignore[arg-type]  # transformers' stubs type .to() narrowly
    n_params = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(args.seed)

    def next_batch() -> tuple[Any, Any]:
        x = _batch(train, args.batch_size, args.n_positions, rng, torch).to(device)  # (B, T)
        return x, x

    run = fit(model, args, next_batch, lambda: _val_loss(model, val, args, torch))
    history, tokens, step, loss_ema = run["history"], run["tokens"], run["steps"], run["train_loss"]

    model.save_pretrained(out, safe_serialization=True)
    figures = {
        "args": asdict(args), "device": device, "parameters": n_params, "corpus_files": len(texts),
        "corpus_chars": sum(len(t) for t in texts), "corpus_tokens": int(len(data)),
        "train_tokens_seen": tokens, "steps": step, "prep_seconds": round(prep_s, 1),
        "train_minutes": run["minutes"],
        "final_val_loss": round(_val_loss(model, val, args, torch), 4),
        "final_train_loss": round(loss_ema or float("nan"), 4), "history": history,
    }
    (out / "pretrain.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures
