"""The next-edit model's edit-replay examples, its training and its benchmark (issue 15)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from specialists.tab.data import Pair
from specialists.tab.next_edit import CURSOR, NEXT, REGION, examples, region_bounds
from specialists.tab.hunks import hunks_of

BEFORE = "".join(f"line {i}\n" for i in range(40))
# two nearby hunks (lines 5 and 7) and one far below (line 30)
AFTER = BEFORE.replace("line 5\n", "line five\n").replace("line 7\n", "line seven\n").replace(
    "line 30\n", "line thirty\n")


def _pair(before: str = BEFORE, after: str = AFTER, repo: str = "toy") -> Pair:
    return Pair(repo=repo, path="m.py", language="python", before=before, after=after)


def _states(pair: Pair) -> list[str]:
    """The file after each hunk of the replay."""
    text, out = pair.before, [pair.before]
    for h in hunks_of(pair.before, pair.after):
        text = text[: h.start] + h.new + text[h.start + len(h.old):]
        out.append(text)
    return out


def test_region_bounds_take_whole_lines_around_the_cursor() -> None:
    text = "a\nbb\nccc\ndddd\ne\n"
    cursor = text.index("cc") + 1
    start, end = region_bounds(text, cursor, above=1, below=1)
    assert text[start:end] == "bb\nccc\ndddd\n"
    assert region_bounds(text, 0, above=3, below=0) == (0, 2)
    assert text[slice(*region_bounds(text, len(text) - 1, above=0, below=5))] == "e\n"


def test_done_examples_make_the_next_hunk_only_inside_the_region() -> None:
    pair = _pair()
    states = _states(pair)
    done = [ex for ex in examples(pair, typing_per_hunk=0)]
    assert [ex.kind for ex in done] == ["done", "done", "done"]
    first, second, last = done
    # after "line five" the cursor is 2 lines above "line 7": the region's next state makes it
    assert first.target != first.region and "line seven" in first.target and "line five" in first.region
    rebuilt = states[1][: first.start] + first.target + states[1][first.start + len(first.region):]
    assert rebuilt == states[2]
    # after "line seven" the next hunk (line 30) is far below: nothing is next here
    assert second.target == second.region and "line 30" not in second.region
    # after the last hunk nothing is next
    assert last.target == last.region
    # the prompt shows the recent edits as diffs and the region with the cursor marked
    assert "-5\n+five\n" in second.prompt and second.prompt.endswith(NEXT)
    marked = second.prompt[second.prompt.index(REGION) + len(REGION): -len(NEXT)]
    assert marked.replace(CURSOR, "") == second.region
    assert marked.index(CURSOR) == second.cursor
    assert second.recent[-1].new == "seven"


def test_typing_examples_finish_the_hunk_being_typed() -> None:
    before = "def f(x):\n    return x\n"
    after = "def f(x):\n    y = x * 2\n    return y\n"
    pair = _pair(before, after)
    typing = [ex for ex in examples(pair, typing_per_hunk=3, rng=random.Random(1)) if ex.kind == "typing"]
    assert typing
    for ex in typing:
        assert ex.target != ex.region
        assert ex.region[: ex.cursor] == ex.target[: ex.cursor]  # the text before the cursor stays
        state = ex.prompt[ex.prompt.index(REGION) + len(REGION): -len(NEXT)].replace(CURSOR, "")
        assert state == ex.region
    # every hunk finished: the last typing example's next state is the file's final text there
    assert any(ex.target in after or after.endswith(ex.target) for ex in typing)


@pytest.fixture(scope="module")
def edit_data(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("ne_data")
    for repo in ("toy", "other"):
        rows = []
        for i in range(5):
            after = BEFORE.replace(f"line {i + 3}\n", f"line {i + 3} changed\n").replace(
                f"line {i + 5}\n", f"line {i + 5} changed\n")
            rows.append({"repo": repo, "commit": f"{i:040x}", "path": f"m{i}.py", "language": "python",
                         "before": BEFORE, "after": after, "date": "2020", "message": "", "hunks": 2,
                         "parent": ""})
        with gzip.open(data / f"{repo}.jsonl.gz", "wt") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return data


@pytest.fixture(scope="module")
def tiny_model(edit_data: Path, tmp_path_factory) -> Path:
    """A next-edit model trained for a few steps on the toy history (seconds)."""
    from specialists.tab.next_edit import NextEditArgs, train

    out = tmp_path_factory.mktemp("ne_model")
    figures = train(NextEditArgs(out=str(out), data=str(edit_data), split="toy", vocab_size=400, n_embd=32,
                                 n_layer=1, n_head=2, n_positions=512, batch_size=2, minutes=1.0, max_steps=3,
                                 val_examples=2, eval_every=2))
    assert figures["examples"] > 0 and figures["steps"] == 3 and figures["projects"] == ["toy"]
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    return out


def test_the_model_answers_a_region_or_nothing(tiny_model: Path) -> None:
    from specialists.tab.next_edit import NextEditModel

    model = NextEditModel(tiny_model)
    ex = next(examples(_pair()))
    text, stats = model.predict(ex.prompt, ex.region)
    assert text is None or isinstance(text, str)
    assert stats.forward_passes >= 1
    # a prompt that leaves no room for the answer is refused, not cut
    text, _ = model.predict(ex.prompt * 40, ex.region)
    assert text is None


def test_benchmark_scores_held_out_projects_only(tiny_model: Path, edit_data: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).parents[2] / "benchmarks" / "next_edit.py"

    def run(*args: str) -> subprocess.CompletedProcess[str]:  # as it is run: tests import no benchmark
        return subprocess.run([sys.executable, str(script), str(edit_data), "--model", str(tiny_model),
                               *args], capture_output=True, text=True, timeout=600)

    done = run("--projects", "other", "--per-project", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    done_kind = summary["results"]["done"]
    assert done_kind["examples"] == 10 and done_kind["unchanged"]["proposed"] == 0
    assert summary["results"]["typing"]["unchanged"]["exact"] == 0
    assert "| done |" in done.stdout
    refused = run("--projects", "toy")
    assert refused.returncode != 0 and "trained on toy" in refused.stderr


def test_repeat_baseline_propagates_the_latest_edit() -> None:
    from specialists.tab.next_edit import repeat_latest

    before = "a = old_name(1)\nb = 2\nc = old_name(3)\n"
    after = "a = new_name(1)\nb = 2\nc = new_name(3)\n"
    done = [ex for ex in examples(_pair(before, after), typing_per_hunk=0)]
    assert len(done) == 2  # after each of the two hunks
    first = done[0]
    assert repeat_latest(first) == first.target == first.region.replace("old_name(3)", "new_name(3)")


# -- served: the model's answer where the policy shows nothing --------------------------------
F_BEFORE = "def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"
F_AFTER = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y + 1\n"


@pytest.fixture(scope="module")
def fitted_model(tmp_path_factory) -> Path:
    """A next-edit model fitted to one edit until it writes its next states (~10 s)."""
    from specialists.tab.next_edit import NextEditArgs, train

    data = tmp_path_factory.mktemp("ne_fit_data")
    with gzip.open(data / "fg.jsonl.gz", "wt") as fh:
        for i in range(4):
            fh.write(json.dumps({"repo": "fg", "commit": f"{i:040x}", "path": f"m{i}.py", "language": "python",
                                 "before": F_BEFORE, "after": F_AFTER, "date": "2020", "message": "",
                                 "hunks": 2, "parent": ""}) + "\n")
    out = tmp_path_factory.mktemp("ne_fit")
    train(NextEditArgs(out=str(out), data=str(data), split="fg", vocab_size=300, n_embd=32, n_layer=1, n_head=2,
                       n_positions=256, batch_size=4, minutes=2.0, max_steps=150, lr=0.01, warmup_steps=5,
                       val_examples=1, eval_every=50, typing_per_hunk=0))
    return out


def _after_first_hunk():
    from specialists.tab.replay import Session

    s = Session(_pair(F_BEFORE, F_AFTER), ask_after_edit=True)
    while (req := s.next_request()) is not None:
        if s.next_edit_at() is not None:
            return s, req
        s.respond(None)
    raise AssertionError("no request after a hunk")


def test_the_models_next_state_is_a_suggestion_the_user_accepts(fitted_model: Path) -> None:
    from specialists.tab.next_edit import NextEditModel

    s, req = _after_first_hunk()
    sug = NextEditModel(fitted_model).suggest(req)
    # the change is an insertion on another line: shown as that line rewritten
    assert sug is not None and sug.kind == "rewrite" and sug.text == "    return y + 1"
    assert req.file[sug.start:sug.end] == "    return y"
    out = s.respond(sug)
    assert out.accepted and out.chars_saved == len(" + 1")
    while s.next_request() is not None:
        s.respond(None)
    assert s.file == F_AFTER and s.saved_chars == len(" + 1")


def test_served_where_the_policy_shows_nothing(fitted_model: Path, tiny_checkpoint: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from router.api.tab import create_app
    from specialists.base import SpecialistError
    from specialists.tab import TabSpecialist
    from tests.tab.test_jump import NothingPolicy

    _, req = _after_first_hunk()
    body = req.to_json()
    for folder, kind in ((str(fitted_model), "next_edit"), (None, None)):
        spec = TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48, next_edit=folder,
                             rewrite_fallback=False, jump_max_lines=0)
        spec.setup()
        spec.policy = NothingPolicy(spec.policy)
        answer = TestClient(create_app(spec)).post("/v1/tab", json=body).json()
        if kind is None:
            assert answer["suggestion"] is None
        else:
            got = answer["suggestion"]
            assert got["kind"] == kind and got["source"] == "next_edit_model" and got["text"] == "    return y + 1", answer
    with pytest.raises(SpecialistError, match="python -m specialists.tab.next_edit"):
        TabSpecialist(checkpoint=str(tiny_checkpoint), context_tokens=48, next_edit=str(tmp_path)).setup()
