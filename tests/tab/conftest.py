"""Fixtures: a toy edit data set and a tiny checkpoint (LM + policy) built in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from specialists.tab.data import Pair, write_pairs

TOY = [
    ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n",
     "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
     "def volume(w, h, d):\n    return w * h * d\n"),
    ("import os\n\n\ndef load(path):\n    with open(path) as fh:\n        return fh.read()\n",
     "import os\nimport sys\n\n\ndef load(path, encoding='utf-8'):\n    with open(path, encoding=encoding) as fh:\n"
     "        return fh.read()\n\n\ndef save(path, text):\n    with open(path, 'w') as fh:\n        fh.write(text)\n"),
    ("class A:\n    def __init__(self, x):\n        self.x = x\n",
     "class A:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
     "    def total(self):\n        return self.x + self.y\n"),
]


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("toy_data")
    pairs = [Pair(repo="toy", path=f"m{i}.py", language="python", before=b, after=a, commit=f"{i:040x}")
             for i, (b, a) in enumerate(TOY * 2)]
    write_pairs(pairs, d / "toy.jsonl.gz")
    return d


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, toy_data) -> Path:
    """A tiny LM pretrained for a few steps, and a policy trained on it for a few updates."""
    from specialists.tab.pretrain import PretrainArgs, pretrain
    from specialists.tab.train import Args, train

    out = tmp_path_factory.mktemp("tiny_ckpt")
    pretrain(PretrainArgs(out=str(out), data=str(toy_data), projects=("toy",), stdlib=True,
                          max_corpus_chars=150_000, vocab_size=400, n_embd=32, n_layer=1, n_head=2,
                          n_positions=96, batch_size=4, max_steps=3, minutes=5, eval_every=2, threads=1))
    train(Args(data=str(toy_data), checkpoint=str(out), out=str(out), train_split="toy", dev_split="toy",
               train_per_project=0, dev_per_project=0, updates=4, pairs_per_update=3, eval_every=2,
               context_tokens=48, cache_dir="", quiet=True))
    return out
