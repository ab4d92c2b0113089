"""The learned fallback: region cut, labels, the checks on a writer's answer, a tiny trained model."""

from __future__ import annotations

import gzip
import os
import json
from pathlib import Path

import pytest

from specialists.apply import make_sketch
from specialists.apply.fallback import checked_region_merge
from specialists.apply.regions import (END, format_prompt, lines_of, region_target, regions,
                                       splice)

BEFORE = "".join(
    f"def f{i}(x):\n    y = x + {i}\n    return y * {i}\n\n\n" for i in range(12)
)
AFTER = BEFORE.replace("    y = x + 3\n", "    y = x + 3\n    y -= 1\n").replace(
    "    return y * 9\n", "    return y * 99\n")
SKETCH = (
    "# ... existing code ...\n"
    "def f3(x):\n    y = x + 3\n    y -= 1\n"
    "# ... existing code ...\n"
    "    y = x + 9\n    return y * 99\n"
    "# ... existing code ...\n"
)


def test_lines_of_round_trips() -> None:
    for text in ("", "a", "a\n", "a\n\nb", "a\r\nb\n"):
        assert "".join(lines_of(text)) == text


def test_regions_place_each_block_and_labels_rebuild_the_file() -> None:
    regs = regions(BEFORE, SKETCH, "python")
    assert regs is not None and len(regs) == 2
    olines = lines_of(BEFORE)
    assert "def f3(x):\n" in regs[0].original_text(olines)
    assert "    return y * 9\n" in regs[1].original_text(olines)
    assert regs[0].segment_text(lines_of(SKETCH)).startswith("# ... existing code ...\ndef f3")
    parts = []
    for r in regs:
        got = region_target(BEFORE, AFTER, r)
        assert got is not None
        parts.append(got)
    assert splice(BEFORE, parts) == AFTER


def test_a_block_with_no_anchor_or_two_equal_places_has_no_region() -> None:
    assert regions(BEFORE, "# ... existing code ...\nnothing_like_this()\n", "python") is None
    filler = "".join(f"z{i} = {i}\n" for i in range(30))
    twice = ("def g(x):\n    y = x + 1\n\n\n" + filler) * 2
    assert regions(twice, "# ...\n    y = x + 1\n    z = 2\n# ...\n", "python") is None


def _writer(texts: list[str]):
    def write(region: str, segment: str):
        return texts.pop(0), {"tokens": 0, "seconds": 0.0}
    return write


def test_checked_merge_keeps_the_true_answer() -> None:
    regs = regions(BEFORE, SKETCH, "python")
    assert regs
    truth = [region_target(BEFORE, AFTER, r)[1] for r in regs]  # type: ignore[index]
    res = checked_region_merge(BEFORE, SKETCH, "python", "m.py", None, _writer(truth))
    assert res.applied and res.merged == AFTER and res.confidence == 0.5


def test_checked_merge_abstains_on_invented_dropped_or_broken_answers() -> None:
    regs = regions(BEFORE, SKETCH, "python")
    assert regs
    olines = lines_of(BEFORE)
    truth = [region_target(BEFORE, AFTER, r)[1] for r in regs]  # type: ignore[index]
    invented = [truth[0].replace("y -= 1", "y -= 2"), truth[1]]
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer(invented))
    assert not res.applied and "neither the original nor the sketch" in (res.reason or "")
    dropped = [regs[0].original_text(olines), truth[1]]  # leaves out the sketch's new line
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer(dropped))
    assert not res.applied and "leaves out" in (res.reason or "")
    # the sketch's context line lost (the model deleted the definition's header): no
    headless = [truth[0].replace("def f3(x):\n", ""), truth[1]]
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer(headless))
    assert not res.applied and "leaves out" in (res.reason or "")
    # the region's own lines swapped
    reordered = truth[1].replace("    y = x + 9\n    return y * 99\n", "    return y * 99\n    y = x + 9\n")
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer([truth[0], reordered]))
    assert not res.applied and "reorders" in (res.reason or "")
    # a line of the original moved to another indentation is a line neither has
    shifted = [truth[0].replace("    return y * 3\n", "return y * 3\n"), truth[1]]
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer(shifted))
    assert not res.applied and "neither the original nor the sketch" in (res.reason or "")
    # the lines pass (a sketch line may be re-indented), the rules' checks on the file do not
    indented = [truth[0].replace("def f3(x):\n", "    def f3(x):\n"), truth[1]]
    res = checked_region_merge(BEFORE, SKETCH, "python", None, None, _writer(indented))
    assert not res.applied and (res.reason or "").startswith("fallback: checks")
    unended = checked_region_merge(BEFORE, SKETCH, "python", None, None,
                                   lambda r, s: (None, {"tokens": 3, "seconds": 0.0, "reason": "x"}))
    assert not unended.applied


def _toy_history(data: Path) -> Path:
    """A toy project's history: six one-line edits of ``BEFORE`` (``toy.jsonl.gz``)."""
    rows = []
    for i in range(6):
        sk_after = BEFORE.replace(f"    return y * {i}\n", f"    return y * {i} + 1\n")
        rows.append({"repo": "toy", "commit": f"{i:040x}", "path": f"m{i}.py", "language": "python",
                     "before": BEFORE, "after": sk_after, "date": "2020", "message": "", "hunks": 1,
                     "parent": ""})
    with gzip.open(data / "toy.jsonl.gz", "wt") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return data


@pytest.fixture(scope="module")
def tiny_fallback(tmp_path_factory) -> Path:
    """A fallback model trained for a few steps on a toy history (seconds)."""
    from specialists.apply.train_fallback import FallbackArgs, train

    data = _toy_history(tmp_path_factory.mktemp("fb_data"))
    out = tmp_path_factory.mktemp("fb_model")
    figures = train(FallbackArgs(out=str(out), data=str(data), projects=("toy",), dev_skip=0,
                                 vocab_size=400, n_embd=32, n_layer=1, n_head=2, n_positions=512,
                                 batch_size=2, minutes=1.0, max_steps=3, val_examples=2, eval_every=2))
    assert figures["examples"] > 0 and figures["steps"] == 3
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    return out


def test_examples_are_prompt_and_ended_answer() -> None:
    from specialists.apply.train_fallback import examples

    rows = [{"before": BEFORE, "after": AFTER, "language": "python"}]
    pairs = list(examples(rows))
    assert pairs
    for prompt, answer in pairs:
        assert prompt.startswith("<|orig|>") and prompt.endswith("<|merged|>") and answer.endswith(END)
    assert any("y -= 1" in a for _, a in pairs)


def test_region_fallback_answers_only_what_passes(tiny_fallback: Path) -> None:
    from specialists.apply.fallback import RegionFallback

    fb = RegionFallback.load(tiny_fallback)
    regs = regions(BEFORE, SKETCH, "python")
    assert regs
    text, info = fb.rewrite_region(regs[0].original_text(lines_of(BEFORE)),
                                   regs[0].segment_text(lines_of(SKETCH)))
    assert info["tokens"] > 0 and info["forward_passes"] >= 1
    res = fb.apply(BEFORE, SKETCH, "python", "m.py")
    if res.applied:  # a few steps of training: whatever it writes must pass the checks
        assert res.merged is not None and res.merged != BEFORE
    else:
        assert (res.reason or "").startswith("fallback:")
    assert res.stats["regions"] >= 1
    assert format_prompt("a\n", "b\n").count("<|") == 3


def test_apply_specialist_fallback_option(tiny_fallback: Path) -> None:
    from specialists.apply import ApplySpecialist

    spec = ApplySpecialist(fallback=str(tiny_fallback))
    spec.setup()
    assert spec.health()["learned_fallback"] == str(tiny_fallback)
    sk = make_sketch(BEFORE, AFTER, "python", k=1)
    out = spec.answer({"original": BEFORE, "sketch": sk.text, "path": "m.py"})
    (result,) = out.output["files"]
    if result["status"] == "applied":
        assert result["stats"]["method"] in ("deterministic", "learned_fallback")
    assert ApplySpecialist().health()["learned_fallback"] is None


def test_examples_cut_here_train_the_same_model_from_the_recipe_alone(tmp_path: Path) -> None:
    """--write-examples then ``specialists/lm_recipe.py --examples`` (what a GPU machine runs,
    with nothing of the project but that file) trains the very model the one-process run does."""
    import subprocess
    import sys

    from safetensors.numpy import load_file

    from specialists.apply.train_fallback import FallbackArgs, train
    from specialists.lm_recipe import load_examples

    data = _toy_history(tmp_path)
    shape = dict(vocab_size=400, n_embd=32, n_layer=1, n_head=2, n_positions=512, batch_size=2,
                 minutes=0.0, max_steps=3, val_examples=2, eval_every=2, warmup_steps=50, threads=1)
    here = tmp_path / "here"
    train(FallbackArgs(out=str(here), data=str(data), projects=("toy",), dev_skip=0, **shape))
    saved = tmp_path / "ex.jsonl.gz"
    wrote = train(FallbackArgs(out=str(tmp_path / "unused"), data=str(data), projects=("toy",), dev_skip=0,
                               write_examples=str(saved), **shape))
    assert not (tmp_path / "unused").exists() and wrote["examples"] > 0
    pairs, corpus, special, header = load_examples(saved)
    assert len(pairs) == wrote["examples"] and "<|orig|>" in special and header["meta"]["commits"] == {"toy": 6}

    there = tmp_path / "there"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in shape.items()]
    script = Path(__file__).resolve().parents[2] / "specialists" / "lm_recipe.py"
    done = subprocess.run([sys.executable, str(script), "--examples", str(saved), "--out", str(there),
                           "--device", "cpu", *flags], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)  # run as a script, outside the repository: no project import
    assert done.returncode == 0, done.stderr
    assert json.loads((there / "train.json").read_text())["steps"] == 3
    assert (here / "tokenizer.json").read_text() == (there / "tokenizer.json").read_text()
    a, b = load_file(here / "model.safetensors"), load_file(there / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_a_wrong_or_cut_examples_file_is_refused_clearly(tmp_path: Path) -> None:
    from specialists.lm_recipe import load_examples, save_examples

    other = tmp_path / "other.jsonl.gz"
    with gzip.open(other, "wt") as fh:
        fh.write(json.dumps({"repo": "toy"}) + "\n")
    with pytest.raises(ValueError, match="not an examples file"):
        load_examples(other)
    good = tmp_path / "good.jsonl.gz"
    save_examples(good, [("p1", "a1"), ("p2", "a2")], ["corpus"], ["<|x|>"])
    assert load_examples(good)[0] == [("p1", "a1"), ("p2", "a2")]
    lines = gzip.open(good, "rt").read().splitlines()
    with gzip.open(tmp_path / "cut.jsonl.gz", "wt") as fh:
        fh.write("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="cut short"):
        load_examples(tmp_path / "cut.jsonl.gz")
    assert not list(tmp_path.glob("*.part"))


def test_the_prepared_device_run_works_end_to_end_on_a_cpu(tmp_path: Path) -> None:
    """benchmarks/device_fallback.sh (the one GPU run prepared for a device session) on the
    CPU with a tiny budget: its parts put back together are a model the fallback loads."""
    import subprocess
    import sys
    import tarfile

    from specialists.apply.fallback import RegionFallback
    from specialists.apply.train_fallback import FallbackArgs, train

    root = Path(__file__).resolve().parents[2]
    saved = tmp_path / "ex.jsonl.gz"
    train(FallbackArgs(data=str(_toy_history(tmp_path)), projects=("toy",), dev_skip=0, write_examples=str(saved)))
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "DEVICE": "cpu", "PYTHON": sys.executable, "MINUTES": "0",
           "SHAPE": "--vocab-size 400 --n-embd 32 --n-layer 1 --n-head 2 --n-positions 512 --batch-size 2 "
                    "--max-steps 2 --val-examples 2"}
    done = subprocess.run(["bash", str(root / "benchmarks" / "device_fallback.sh"), str(saved)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    parts = sorted(out.glob("fallback.tgz.part-*"))
    assert parts and (out / "train.json").exists() and (out / "train.log").exists()
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back
    archive = tmp_path / "model.tgz"
    archive.write_bytes(b"".join(p.read_bytes() for p in parts))
    model_dir = tmp_path / "model"
    with tarfile.open(archive) as tar:
        tar.extractall(model_dir, filter="data")
    assert RegionFallback.load(model_dir) is not None


def test_the_prepared_device_run_refuses_without_examples(tmp_path: Path) -> None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(["bash", str(root / "benchmarks" / "device_fallback.sh"), str(tmp_path / "none.gz")],
                          cwd=root, env={**os.environ, "OUT": str(tmp_path / "out")}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "cut them first" in done.stderr
