"""Contrastive fine-tuning of the embedder on (docstring, code) pairs, in-batch negatives.

The recipe (``complement retrieval finetune``): pairs from the installed site-packages —
never the standard library, which is the benchmark; vendored copies of stdlib code are
skipped and any pair whose docstring also appears in the standard library is dropped —
then InfoNCE over a batch (each docstring against every function in the batch, both
directions; Oord et al. 2018, as sentence-transformers' MultipleNegativesRankingLoss).

Works on the static table (fast: minutes on 2 cores) or on a sentence-transformers model
(slow on a CPU; give it a step budget). The result is written to ``out`` — under
``$COMPLEMENT_HOME/models`` by default, never into the repository — and used by pointing
the index's ``embedder`` at that directory.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from retrieval.embedders import (
    SentenceTransformerEmbedder,
    StaticEmbedder,
    data_home,
    open_embedder,
    save_static,
)
from retrieval.pairs import iter_pairs

__all__ = ["Args", "finetune"]

log = logging.getLogger(__name__)


@dataclass
class Args:
    base: str = "static-base"
    """embedder to start from: ``static-base`` (distilled MiniLM), ``minilm`` or a directory"""
    out: Path = field(default_factory=lambda: data_home() / "models" / "static-ft")
    """where the fine-tuned model is written (a directory; replaced atomically)"""
    roots: list[Path] | None = None
    """source trees to mine pairs from (default: site-packages)"""
    exclude: tuple[str, ...] = ("sklearn", "networkx")
    """top-level packages kept out of training: the fusion weight is tuned on them"""
    max_pairs: int = 60_000
    """pairs sampled for training (after decontamination)"""
    dev_pairs: int = 1_000
    """pairs held out to report MRR@10 before and after (1,000-candidate pool)"""
    epochs: float = 3.0
    """passes over the training pairs"""
    max_seconds: float = 240.0
    """wall-clock budget for the optimisation loop"""
    batch_size: int = 256
    """in-batch negatives: each query sees batch_size - 1 wrong functions"""
    lr: float = 3e-3
    """Adam learning rate (static table); a transformer uses lr / 100"""
    temperature: float = 0.05
    """softmax temperature on cosine similarities"""
    query_tokens: int = 64
    """query truncation (tokens)"""
    doc_tokens: int = 256
    """function truncation (tokens)"""
    seed: int = 0
    """sampling and shuffling seed"""
    asymmetric: bool = False
    """train a separate token table for queries (docstrings) and for code"""
    decontaminate: bool = True
    """drop pairs whose docstring paragraph is also in the standard library"""


def _stdlib_queries() -> set[str]:
    import sysconfig

    from retrieval.pairs import pairs_from_source

    root = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    for path in root.rglob("*.py"):
        if "site-packages" in path.parts:
            continue
        try:
            source = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        seen.update(q for q, _ in pairs_from_source("", source))
    return seen


def load_pairs(args: Args) -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, int]]:
    pairs = list(iter_pairs(args.roots, max_pairs=10**7, exclude=args.exclude))
    info = {"mined": len(pairs)}
    if args.decontaminate:
        banned = _stdlib_queries()
        pairs = [p for p in pairs if p[0] not in banned]
        info["after_decontamination"] = len(pairs)
    rng = random.Random(args.seed)
    rng.shuffle(pairs)
    dev = pairs[: args.dev_pairs]
    train = pairs[args.dev_pairs: args.dev_pairs + args.max_pairs]
    info["train"], info["dev"] = len(train), len(dev)
    return train, dev, info


def dev_mrr(emb: Any, dev: list[tuple[str, str]]) -> float:
    """MRR@10 of each dev docstring against all dev functions."""
    import numpy as np

    encode_q = getattr(emb, "encode_queries", emb.encode)
    q = np.asarray(encode_q([a for a, _ in dev]))
    d = np.asarray(emb.encode([b for _, b in dev]))
    sims = q @ d.T  # (Q, D)
    correct = sims[np.arange(len(dev)), np.arange(len(dev))][:, None]
    ranks = (sims > correct).sum(axis=1) + 1
    return float(np.where(ranks <= 10, 1.0 / ranks, 0.0).mean())


def _info_nce(q: Any, d: Any, temperature: float) -> Any:
    import torch
    import torch.nn.functional as F

    logits = q @ d.T / temperature  # (B, B): row i's positive is column i
    target = torch.arange(len(q))
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def _train_static(emb: StaticEmbedder, train: list[tuple[str, str]], args: Args,
                  log_fn: Callable[[str], None]) -> Any:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    table = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(emb.table.copy()),
                                                  freeze=False, mode="mean")
    q_table = table
    if args.asymmetric:
        q_table = torch.nn.EmbeddingBag.from_pretrained(
            torch.from_numpy(emb.query_table.copy()), freeze=False, mode="mean")
    emb.max_tokens = args.query_tokens
    q_ids = emb.token_ids([a for a, _ in train])
    emb.max_tokens = args.doc_tokens
    d_ids = emb.token_ids([b for _, b in train])

    def bag(rows: list[list[int]], which: Any = table) -> Any:
        rows = [r or [0] for r in rows]
        offsets = torch.tensor(np.cumsum([0] + [len(r) for r in rows[:-1]]), dtype=torch.long)
        flat = torch.tensor([t for r in rows for t in r], dtype=torch.long)
        return F.normalize(which(flat, offsets), dim=-1)  # (B, d)

    params = list(table.parameters()) + (list(q_table.parameters()) if args.asymmetric else [])
    opt = torch.optim.Adam(params, lr=args.lr)
    steps = int(args.epochs * len(train) / args.batch_size)
    order = list(range(len(train)))
    rng = random.Random(args.seed)
    t0, step = time.perf_counter(), 0
    while step < steps and time.perf_counter() - t0 < args.max_seconds:
        rng.shuffle(order)
        for s in range(0, len(order) - args.batch_size + 1, args.batch_size):
            batch = order[s: s + args.batch_size]
            loss = _info_nce(bag([q_ids[i] for i in batch], q_table), bag([d_ids[i] for i in batch]),
                             args.temperature)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 50 == 0:
                log_fn(f"step {step}/{steps} loss {loss.item():.3f} "
                       f"({time.perf_counter() - t0:.0f} s)")
            if step >= steps or time.perf_counter() - t0 >= args.max_seconds:
                break
    query = q_table.weight.detach().numpy() if args.asymmetric else None
    return table.weight.detach().numpy(), query, step


def _train_transformer(emb: SentenceTransformerEmbedder, train: list[tuple[str, str]],
                       args: Args, log_fn: Callable[[str], None]) -> int:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    model = emb.model
    model.max_seq_length = args.doc_tokens
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr / 100)
    steps = int(args.epochs * len(train) / args.batch_size)
    t0, step = time.perf_counter(), 0
    rng = random.Random(args.seed)

    def embed(texts: list[str]) -> Any:
        feats = model.tokenize(texts)
        return F.normalize(model(feats)["sentence_embedding"], dim=-1)

    while step < steps and time.perf_counter() - t0 < args.max_seconds:
        batch = rng.sample(train, args.batch_size)
        loss = _info_nce(embed([a for a, _ in batch]), embed([b for _, b in batch]),
                         args.temperature)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        log_fn(f"step {step}/{steps} loss {loss.item():.3f} ({time.perf_counter() - t0:.0f} s)")
    model.eval()
    return step


def finetune(args: Args, log_fn: Callable[[str], None] = print) -> dict[str, Any]:
    """Mine pairs, train, write the model to ``args.out``; returns a report."""
    t0 = time.perf_counter()
    train, dev, info = load_pairs(args)
    log_fn(f"pairs: {info}")
    emb = open_embedder(args.base)
    before = dev_mrr(emb, dev)
    log_fn(f"dev MRR@10 before: {before:.4f}")
    out = Path(args.out).expanduser()
    if isinstance(emb, StaticEmbedder):
        table, query_table, steps = _train_static(emb, train, args, log_fn)
        meta = {**emb.meta, "finetuned_from": emb.name, "recipe": "static+infonce",
                "args": {k: str(v) for k, v in asdict(args).items()}}
        save_static(out, table, emb.path / "tokenizer.json", meta, query_table)
        tuned: Any = StaticEmbedder(out)
    elif isinstance(emb, SentenceTransformerEmbedder):
        steps = _train_transformer(emb, train, args, log_fn)
        emb.model.save(str(out))
        tuned = emb
    else:
        raise ValueError(f"cannot fine-tune embedder {emb.name!r}: not static nor a "
                         "sentence-transformers model")
    after = dev_mrr(tuned, dev)
    report = {"base": args.base, "out": str(out), "steps": steps, **info,
              "dev_mrr10_before": round(before, 4), "dev_mrr10_after": round(after, 4),
              "seconds": round(time.perf_counter() - t0, 1)}
    (out / "finetune.json").write_text(json.dumps(report, indent=1))
    log_fn(json.dumps(report))
    return report
