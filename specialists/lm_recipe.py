"""The recipe for the small causal LMs this project trains from scratch on a CPU.

The Tab LM (``specialists/tab/pretrain.py``) and the applier's learned fallback
(``specialists/apply/train_fallback.py``) share it: a byte-level BPE tokenizer trained here
(GPT-2's scheme, so any UTF-8 text encodes without unknowns), a small GPT-2 with tied
embeddings, AdamW with weight decay on the matrices only, and a schedule that follows a
wall-clock budget (linear warm-up, then cosine decay to a tenth of the peak), on the CPU or,
where one is visible (``--device``), a GPU in bf16 autocast. Each caller
brings its own corpus; prompt → answer trainers (the fallback, the next-edit model) share
the batches that mask the prompt out of the loss. No weights come from a hub.

It sits below both specialists (the layers forbid one specialist importing another).

A prompt -> answer trainer can also save its cut examples (:func:`save_examples`: the
prompt/answer pairs, the tokenizer's corpus and the special tokens, one self-describing
``.jsonl.gz``) and train from them elsewhere with this file alone, run as a script — it
imports nothing of the project, so a GPU machine with torch, transformers and tokenizers
needs no other package:

    python specialists/lm_recipe.py --examples runs/fallback_examples.jsonl.gz \
        --out runs/apply_fallback --device cuda --minutes 8
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["EOS", "EXAMPLES_FORMAT", "ExamplesArgs", "RecipeArgs", "add_arguments", "load_examples", "main",
           "save_examples", "byte_level_bpe", "encode_examples", "fit", "from_arguments",
           "masked_batch", "masked_val_loss", "resolve_device", "small_gpt2", "train_prompt_answer"]

EOS = "<|endoftext|>"
EXAMPLES_FORMAT = "complement-prompt-answer-examples/1"
"""The first line of a :func:`save_examples` file names this format."""


@dataclass
class RecipeArgs:
    """The model's shape and the optimisation's settings; each trainer's arguments extend it."""

    vocab_size: int = 4096
    """BPE vocabulary; small, because the output layer is most of a small model's cost."""
    n_embd: int = 192
    """Width of the model (embedding and hidden size)."""
    n_layer: int = 4
    """Transformer blocks."""
    n_head: int = 4
    """Attention heads per block (must divide n_embd)."""
    n_positions: int = 256
    """Context length in tokens."""
    batch_size: int = 16
    """Sequences per optimisation step."""
    lr: float = 1e-3
    """Peak learning rate; linear warm-up, then cosine decay over the time budget."""
    warmup_steps: int = 100
    """Steps of linear learning-rate warm-up."""
    weight_decay: float = 0.1
    """AdamW weight decay, on the matrices only."""
    minutes: float = 25.0
    """Wall-clock budget for the optimisation loop; the schedule follows elapsed time."""
    max_steps: int = 0
    """Stop after this many steps (0: only the time budget stops training)."""
    eval_every: int = 200
    """Validation loss printed and kept every this many steps."""
    threads: int = 2
    """torch CPU threads."""
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (a GPU where one is visible); on a GPU the forward and
    backward passes run in bf16 autocast, the weights and optimiser state in fp32."""
    seed: int = 0
    """Seeds the shuffles, the batches and the initial weights."""


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` where torch sees a GPU, else ``cpu``; ``cuda`` without one is an
    error that says so (rather than a failure deep inside the first step)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: torch sees no GPU here; use --device cpu (or auto)")
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"--device {name!r}: use cpu, cuda or auto")
    return name


def _autocast(model: Any, torch: Any) -> Any:
    """bf16 autocast on a GPU, nothing on the CPU (where fp32 is the faster path here)."""
    import contextlib

    device = next(model.parameters()).device
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def byte_level_bpe(texts: Sequence[str], vocab_size: int, special_tokens: Sequence[str] = ()) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, with :data:`EOS` and
    ``special_tokens`` as its first ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=[EOS, *special_tokens],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def small_gpt2(args: RecipeArgs, tok: Any) -> Any:
    """A freshly initialised GPT-2 of ``args``' shape over ``tok``'s vocabulary."""
    from transformers import GPT2Config, GPT2LMHeadModel

    eos = tok.token_to_id(EOS)
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=args.n_positions, n_embd=args.n_embd,
                        n_layer=args.n_layer, n_head=args.n_head, bos_token_id=eos, eos_token_id=eos,
                        tie_word_embeddings=True)
    return GPT2LMHeadModel(config)


def fit(model: Any, args: RecipeArgs, next_batch: Callable[[], tuple[Any, Any]],
        evaluate: Callable[[], float], *, count_tokens: Callable[[Any], int] | None = None,
        ema: float = 0.98) -> dict[str, Any]:
    """Train ``model`` in place on ``next_batch()``'s ``(input_ids, labels)`` until the time
    budget (or ``max_steps``) runs out, printing and keeping ``evaluate()`` every
    ``eval_every`` steps. The batches go to the model's device (put the model there first);
    on a GPU the passes run in bf16 autocast. Returns ``steps``, ``tokens`` (``count_tokens``
    of each batch's inputs; all of them by default), ``train_loss`` (its moving average),
    ``history`` and ``minutes``."""
    import torch

    device = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    budget = args.minutes * 60
    history: list[dict[str, Any]] = []
    step = tokens = 0
    loss_ema: float | None = None
    start = time.time()
    while True:
        frac = min(1.0, (time.time() - start) / budget) if budget > 0 else 0.0
        if args.max_steps:
            frac = max(frac, step / args.max_steps)
        if frac >= 1.0:
            break
        lr = args.lr * min(1.0, (step + 1) / args.warmup_steps) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = next_batch()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with _autocast(model, torch):
            loss = model(input_ids=x, labels=y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel() if count_tokens is None else count_tokens(x)
        loss_ema = loss.item() if loss_ema is None else ema * loss_ema + (1 - ema) * loss.item()
        if step % args.eval_every == 0:
            row = {"step": step, "tokens": tokens, "minutes": round((time.time() - start) / 60, 2),
                   "train_loss": round(loss_ema, 4), "val_loss": round(evaluate(), 4)}
            history.append(row)
            print(json.dumps(row), flush=True)
    return {"steps": step, "tokens": tokens, "train_loss": loss_ema, "history": history,
            "minutes": round((time.time() - start) / 60, 2)}


def encode_examples(tok: Any, pairs: Sequence[tuple[str, str]], limit: int) -> list[tuple[list[int], int]]:
    """(prompt, answer) texts as (token ids, prompt length), those of at most ``limit`` tokens."""
    out = []
    for prompt, answer in pairs:
        p = tok.encode(prompt).ids
        a = tok.encode(answer).ids
        if len(p) + len(a) <= limit:
            out.append((p + a, len(p)))
    return out


def masked_batch(items: Sequence[tuple[list[int], int]], torch: Any) -> tuple[Any, Any]:
    """Right-padded ``(input_ids, labels)`` with the prompt and the padding out of the loss."""
    width = max(len(ids) for ids, _ in items)
    x = torch.zeros((len(items), width), dtype=torch.long)
    y = torch.full((len(items), width), -100, dtype=torch.long)
    for r, (ids, n_prompt) in enumerate(items):
        x[r, :len(ids)] = torch.tensor(ids)
        y[r, n_prompt:len(ids)] = torch.tensor(ids[n_prompt:])
    return x, y


def masked_val_loss(model: Any, val: Sequence[tuple[list[int], int]], batch_size: int, torch: Any) -> float:
    """Mean loss per answer token of ``val`` (:func:`encode_examples` items)."""
    model.eval()
    device = next(model.parameters()).device
    total = count = 0.0
    with torch.no_grad(), _autocast(model, torch):
        for i in range(0, len(val), batch_size):
            x, y = masked_batch(val[i:i + batch_size], torch)
            x, y = x.to(device), y.to(device)
            n = int((y[:, 1:] != -100).sum())
            total += float(model(input_ids=x, labels=y).loss) * n
            count += n
    model.train()
    return total / max(count, 1.0)


def train_prompt_answer(args: RecipeArgs, items: Sequence[tuple[str, str]], corpus: Sequence[str],
                        special_tokens: Sequence[str], out: Any, val_examples: int) -> dict[str, Any]:
    """The prompt -> answer trainers' common part: a tokenizer on ``corpus`` with
    ``special_tokens`` (``out/tokenizer.json``), ``items`` of at most ``n_positions`` tokens
    (the first ``val_examples``, at most a tenth, held for validation), a fresh small GPT-2
    fitted with the prompt masked out of the loss (on ``args.device``) and saved in ``out`` (a
    ``Path``; in safetensors shards of at most 15 MB, so a GPU machine's files come back
    whole). Returns the run's figures."""
    import torch

    device = resolve_device(args.device)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    tok = byte_level_bpe(corpus, args.vocab_size, special_tokens)
    tok.save(str(out / "tokenizer.json"))
    data = encode_examples(tok, items, args.n_positions)
    n_val = min(val_examples, len(data) // 10)
    val, train_set = data[:n_val], data[n_val:]
    print(json.dumps({"examples": len(items), "fit": len(data), "train": len(train_set), "val": n_val}), flush=True)
    model = small_gpt2(args, tok)
    model.to(device)  # type: ignore[arg-type]  # transformers' stubs type .to() narrowly
    rng = random.Random(args.seed)

    def next_batch() -> tuple[Any, Any]:
        return masked_batch(rng.sample(train_set, min(args.batch_size, len(train_set))), torch)

    run = fit(model, args, next_batch, lambda: masked_val_loss(model, val, args.batch_size, torch),
              count_tokens=lambda x: int((x != 0).sum()), ema=0.95) if train_set else \
        {"steps": 0, "tokens": 0, "train_loss": None, "history": [], "minutes": 0.0}
    final_val = round(masked_val_loss(model, val, args.batch_size, torch), 4) if val else None
    model.to("cpu")  # type: ignore[arg-type]
    model.save_pretrained(out, safe_serialization=True, max_shard_size="15MB")
    return {
        "device": device, "examples": len(items), "examples_fit": len(data), "train_examples": len(train_set), "val_examples": n_val,
        "parameters": sum(p.numel() for p in model.parameters()), "steps": run["steps"],
        "train_tokens_seen": run["tokens"], "train_minutes": run["minutes"],
        "final_val_loss": final_val,
        "final_train_loss": round(run["train_loss"], 4) if run["train_loss"] is not None else None,
        "history": run["history"],
    }


def _field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string right under it) in ``cls`` and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(inspect.getsource(klass).lstrip())
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """A ``--flag`` for each field of the dataclass ``cls``, with its docstring and default
    as the help: booleans as ``--x/--no-x``, lists and tuples as several values (or one
    comma-separated)."""
    docs = _field_docs(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
        doc = docs.get(f.name, "")
        if isinstance(default, bool):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                                help=doc or None)
        elif isinstance(default, (list, tuple)):
            parser.add_argument(flag, dest=f.name, nargs="*", default=default, metavar="VALUE",
                                help=f"{doc} (default: {','.join(map(str, default)) or 'none'})".strip())
        else:
            parser.add_argument(flag, dest=f.name, type=type(default), default=default,
                                help=f"{doc} (default: %(default)s)".strip())


def from_arguments(cls: type, ns: argparse.Namespace) -> Any:
    """The dataclass ``cls`` from a namespace :func:`add_arguments` parsed."""
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc,operator]
        if isinstance(default, (list, tuple)):
            items = [x for v in values[f.name] for x in str(v).split(",") if x]
            values[f.name] = tuple(items) if isinstance(default, tuple) else items
    return cls(**values)


# -- examples cut in one place, trained on in another -----------------------------------
def save_examples(path: Any, pairs: Sequence[tuple[str, str]], corpus: Sequence[str],
                  special_tokens: Sequence[str], meta: dict[str, Any] | None = None) -> None:
    """Write a self-describing examples file: a header line (the format, the special tokens,
    ``meta``), then one line per corpus text and one per (prompt, answer). Written to a
    temporary name and moved into place, so a failed write leaves no half file."""
    import gzip
    import os
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"format": EXAMPLES_FORMAT, "special_tokens": list(special_tokens),
                                 "corpus": len(corpus), "pairs": len(pairs), "meta": meta or {}}) + "\n")
        for text in corpus:
            handle.write(json.dumps({"corpus": text}) + "\n")
        for prompt, answer in pairs:
            handle.write(json.dumps({"prompt": prompt, "answer": answer}) + "\n")
    os.replace(tmp, path)


def load_examples(path: Any) -> tuple[list[tuple[str, str]], list[str], list[str], dict[str, Any]]:
    """(pairs, corpus, special tokens, header) of a :func:`save_examples` file; a file of
    another kind, or cut short, is a ``ValueError`` that says which."""
    import gzip

    pairs: list[tuple[str, str]] = []
    corpus: list[str] = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "{}")
            if header.get("format") != EXAMPLES_FORMAT:
                raise ValueError(f"{path}: not an examples file (its first line should name "
                                 f"{EXAMPLES_FORMAT}); write one with the trainer's --write-examples")
            for line in handle:
                row = json.loads(line)
                if "corpus" in row:
                    corpus.append(row["corpus"])
                else:
                    pairs.append((row["prompt"], row["answer"]))
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the examples ({exc})") from exc
    if len(pairs) != header.get("pairs") or len(corpus) != header.get("corpus"):
        raise ValueError(f"{path}: cut short ({len(pairs)} of {header.get('pairs')} examples, "
                         f"{len(corpus)} of {header.get('corpus')} corpus texts)")
    return pairs, corpus, list(header.get("special_tokens") or []), header


@dataclass
class ExamplesArgs(RecipeArgs):
    examples: str = ""
    """The examples file (:func:`save_examples`; e.g. ``python -m specialists.apply.train_fallback
    --write-examples FILE``)."""
    out: str = "runs/prompt_answer"
    """Folder the tokenizer, model and ``train.json`` are written to."""
    val_examples: int = 200
    """Examples held out of training for the validation loss."""


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train a prompt -> answer model from an examples file (see the module's docstring)."""
    from pathlib import Path

    parser = argparse.ArgumentParser(description="Train a small prompt -> answer GPT-2 from an examples file.")
    add_arguments(parser, ExamplesArgs)
    args = from_arguments(ExamplesArgs, parser.parse_args(argv))
    if not args.examples:
        parser.error("--examples FILE is required")
    try:
        pairs, corpus, special, header = load_examples(args.examples)
        resolve_device(args.device)
    except ValueError as exc:
        parser.error(str(exc))
    random.Random(args.seed).shuffle(pairs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = train_prompt_answer(args, pairs, corpus, special, out, args.val_examples)
    figures = {"args": dataclasses.asdict(args), "examples_meta": header.get("meta", {}), **run}
    (out / "train.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "history"}), flush=True)
    return figures


if __name__ == "__main__":
    main()
