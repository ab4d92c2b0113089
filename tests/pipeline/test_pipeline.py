"""The edit pipeline end to end against the fake frontier (scripted answers) and the replay."""

from __future__ import annotations

import asyncio
import difflib
import re
import time
from pathlib import Path
from typing import Any

import pytest

from retrieval.specialist import RetrievalSpecialist
from router.edit import (
    CommandCheck,
    EditPipeline,
    EditRequest,
    ParseCheck,
    apply_search_replace,
    parse_blocks,
    parse_search_replace,
)
from router.frontier import FrontierClient
from router.replay import ReplayStore, ReplayTask, install, search_replace_blocks
from specialists.apply import ApplySpecialist, make_sketch
from tests.fakes.fake_frontier import FakeFrontier
from tests.pipeline.conftest import AFTER, BEFORE, SANDBOX, fenced

# A block between markers that matches no line of the file: the applier cannot place it.
UNPLACEABLE = ("# ... existing code ...\nfrobnicate_the_widget(zz)\n    zzz = qqq\n"
               "# ... existing code ...\n")


def run(pipeline: EditPipeline, req: EditRequest):  # type: ignore[no-untyped-def]
    return asyncio.run(pipeline.run(req))


def pipe(client: FrontierClient, targets: list[str], **kw: Any) -> EditPipeline:
    """A pipeline with the real applier (the registry's default) and what ``kw`` adds."""
    return EditPipeline(client, targets, applier=ApplySpecialist(), **kw)


def retriever(tmp_path: Path) -> Any:
    """The real retrieval specialist on a hashing embedder (no model to load)."""
    spec = RetrievalSpecialist(index_dir=str(tmp_path / "idx"), embedder="hash:64",
                               index={"min_chunk_chars": 10})
    spec.setup()
    spec.wait_ready()
    return spec


def repo_with_app(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(BEFORE)
    return repo


def test_sketch_is_applied_and_traced(client: FrontierClient, fake: FakeFrontier,
                                      tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    result = run(pipe(client, ["fake"], retriever=retriever(tmp_path)),
                 EditRequest("add a docstring to greet", repo=str(repo), files=["app.py"]))
    assert result.status == "applied" and result.format == "sketch"
    assert result.files["app.py"] == AFTER
    assert '+    """Say hello."""' in result.diff
    frontier = [s for s in result.trace if s.stage == "frontier"]
    assert len(frontier) == 1 and frontier[0].model == "fake"
    assert frontier[0].output_tokens > 0 and frontier[0].cost_usd > 0
    assert frontier[0].latency_kind == "measured"
    assert [s.stage for s in result.trace] == ["retrieve", "frontier", "apply", "verify"]
    assert result.trace[0].outcome == "skipped", "named files: an unindexed repo is not indexed"
    assert "complement index" in (result.trace[0].reason or "")
    assert (repo / "app.py").read_text() == BEFORE, "nothing is written without write"
    system = fake.requests[0]["messages"][0]["content"]
    assert "# ... existing code ..." in system, "the prompt states the marker convention"


def test_an_answer_written_as_a_diff_is_applied_without_escalating(
        client: FrontierClient, fake: FakeFrontier, tmp_path: Path) -> None:
    # asked for a sketch, the model answers with a unified diff (line numbers left out)
    diff = "".join(difflib.unified_diff(BEFORE.splitlines(True), AFTER.splitlines(True), n=2))
    diff = re.sub(r"(?m)^@@ .* @@$", "@@ ... @@", diff.split("\n", 2)[2])
    fake.push(f"text:```diff\n{diff}```\n")
    result = run(pipe(client, ["fake"]),
                 EditRequest("add a docstring to greet", repo=str(repo_with_app(tmp_path)),
                             files=["app.py"]))
    assert result.status == "applied" and result.files["app.py"] == AFTER
    assert [s.stage for s in result.trace].count("frontier") == 1, "no escalation"


def test_one_diff_for_two_files_in_one_fence_applies_to_both(
        client: FrontierClient, fake: FakeFrontier, tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    (repo / "util.py").write_text("A = 1\nB = 2\n")
    diff = "".join(difflib.unified_diff(BEFORE.splitlines(True), AFTER.splitlines(True),
                                        "a/app.py", "b/app.py", n=2))
    diff += "--- a/util.py\n+++ b/util.py\n@@ -1,2 +1,2 @@\n A = 1\n-B = 2\n+B = 3\n"
    fake.push(f"text:Both files:\n```diff\n{diff}```\n")
    result = run(pipe(client, ["fake"]),
                 EditRequest("two files", repo=str(repo), files=["app.py", "util.py"]))
    assert result.status == "applied", result.trace
    assert result.files == {"app.py": AFTER, "util.py": "A = 1\nB = 3\n"}
    assert [s.stage for s in result.trace].count("frontier") == 1, "no escalation"


def test_two_blocks_for_one_file_both_apply(client: FrontierClient, fake: FakeFrontier,
                                            tmp_path: Path) -> None:
    # the answer shows two places of app.py in two fences, prose between: before, the second
    # was merged into the original file and the first change was lost without a word
    after = AFTER.replace("    return a + b\n", "    return b + a\n")
    first = "# ... existing code ...\ndef greet(name):\n    \"\"\"Say hello.\"\"\"\n" \
            "    return f\"hello {name}\"\n# ... existing code ...\n"
    second = "# ... existing code ...\ndef add(a, b):\n    return b + a\n# ... existing code ...\n"
    fake.push(f"text:First the greeting:\n```python app.py\n{first}```\nThen add:\n"
              f"```python app.py\n{second}```\n")
    result = run(pipe(client, ["fake"]),
                 EditRequest("two changes", repo=str(repo_with_app(tmp_path)), files=["app.py"]))
    assert result.status == "applied", result.trace
    assert result.files["app.py"] == after


def test_abstain_escalates_to_search_replace(client: FrontierClient, fake: FakeFrontier) -> None:
    fake.push(fenced(UNPLACEABLE), "text:" + search_replace_blocks(BEFORE, AFTER, "app.py"))
    result = run(pipe(client, ["fake"]),
                 EditRequest("add a docstring", texts={"app.py": BEFORE}))
    assert result.status == "applied" and result.format == "search_replace"
    assert result.files["app.py"] == AFTER
    abstain = next(s for s in result.trace if s.stage == "apply" and s.outcome == "abstained")
    assert abstain.format == "sketch" and "abstained" in (abstain.reason or "")
    assert fake.requests[1]["messages"][0]["content"].count("SEARCH") >= 1


def test_a_guessed_merge_escalates_and_stays_as_the_fallback(client: FrontierClient,
                                                            fake: FakeFrontier) -> None:
    # The sketch writes one blank line where the file has two, next to a rewrite: the
    # applier keeps both (writers drop blank lines) and says it guessed. The cascade asks for
    # the change in full; the single sketch route returns the guess.
    before = "x = 1\n\n\n# old note\ny = 2\n"
    after = "x = 1\n\n# new note\ny = 2\n"
    sketch = fenced("# ...\nx = 1\n\n# new note\ny = 2\n")
    fake.push(sketch, "text:" + search_replace_blocks(before, after, "app.py"))
    result = run(pipe(client, ["fake"]), EditRequest("reword", texts={"app.py": before}))
    assert result.status == "applied" and result.format == "search_replace"
    assert result.files["app.py"] == after
    guessed = next(s for s in result.trace if s.detail.get("guessed"))
    assert guessed.stage == "verify" and "blank run" in (guessed.reason or "")
    # the next step fails: the guess is the answer
    fake.push(sketch, "text:no blocks here", "text:nor here")
    result = run(pipe(client, ["fake"]), EditRequest("reword", texts={"app.py": before}))
    assert result.status == "applied" and result.format == "sketch"
    assert result.files["app.py"] == "x = 1\n\n\n# new note\ny = 2\n"
    fake.push(sketch)
    single = run(pipe(client, ["fake"]),
                 EditRequest("reword", texts={"app.py": before}, strategy="sketch"))
    assert single.format == "sketch" and len(fake.requests) == 2 + 3 + 1


def test_prose_only_escalates_to_whole_file(client: FrontierClient, fake: FakeFrontier) -> None:
    fake.push("text:Sure! I would add a docstring.", "text:I cannot find it.",
              fenced(AFTER))
    result = run(pipe(client, ["fake"]),
                 EditRequest("add a docstring", texts={"app.py": BEFORE}))
    assert result.status == "applied" and result.format == "whole_file"
    assert result.files["app.py"] == AFTER
    reasons = [s.reason for s in result.trace if s.stage == "apply" and s.outcome != "ok"]
    assert "prose only" in (reasons[0] or "") and "SEARCH/REPLACE" in (reasons[1] or "")
    assert result.cost_usd == pytest.approx(sum(s.cost_usd for s in result.trace))


def test_every_step_failing_is_a_clean_result_and_writes_nothing(
        client: FrontierClient, fake: FakeFrontier, tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    fake.push("text:no", "text:no", "text:no")
    result = run(pipe(client, ["fake"], retriever=retriever(tmp_path)),
                 EditRequest("x", repo=str(repo), files=["app.py"], write=True))
    assert result.status == "failed" and result.diff == "" and result.files == {}
    assert "every step of the chain failed" in (result.reason or "")
    assert (repo / "app.py").read_text() == BEFORE
    assert sorted(p.name for p in repo.iterdir()) == ["app.py"]


def test_write_is_atomic_and_creates_a_new_file(client: FrontierClient, fake: FakeFrontier,
                                                tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    new = 'def helper():\n    return 1\n'
    fake.push(fenced(new, "pkg/helpers.py"))
    result = run(pipe(client, ["fake"], retriever=retriever(tmp_path)),
                 EditRequest("add a helper module", repo=str(repo), files=["pkg/helpers.py"],
                             write=True))
    assert result.status == "applied", result.reason
    assert (repo / "pkg" / "helpers.py").read_text() == new
    assert result.written == ["pkg/helpers.py"] and result.trace[-1].stage == "write"
    assert "--- /dev/null" in result.diff
    assert [p.name for p in (repo / "pkg").iterdir()] == ["helpers.py"], "no temp file left"


def test_hanging_verification_times_out_and_escalates(client: FrontierClient,
                                                      fake: FakeFrontier, tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    sketch = fenced(make_sketch(BEFORE, AFTER, "python", k=1).text)
    fake.push(sketch, "text:" + search_replace_blocks(BEFORE, AFTER, "app.py"), fenced(AFTER))
    started = time.monotonic()
    hang = CommandCheck(["sleep", "30"], 0.3, sandbox=SANDBOX)
    result = run(pipe(client, ["fake"], retriever=retriever(tmp_path),
                      verifiers=[ParseCheck(), hang]),
                 EditRequest("doc", repo=str(repo), files=["app.py"], write=True))
    assert time.monotonic() - started < 10
    verifies = [s for s in result.trace if s.stage == "verify"]
    assert len(verifies) == 3 and all("timed out" in (s.reason or "") for s in verifies)
    assert result.status == "failed"
    assert (repo / "app.py").read_text() == BEFORE


def test_verification_command_sees_the_merged_file(client: FrontierClient, fake: FakeFrontier,
                                                   tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    grep = CommandCheck(["grep", "-q", "Say hello", "app.py"], sandbox=SANDBOX)
    result = run(pipe(client, ["fake"], retriever=retriever(tmp_path),
                      verifiers=[ParseCheck(), grep]),
                 EditRequest("doc", repo=str(repo), files=["app.py"]))
    assert result.status == "applied"
    assert next(s for s in result.trace if s.stage == "verify").outcome == "ok"


def test_parse_regression_fails_verification(client: FrontierClient, fake: FakeFrontier) -> None:
    broken = AFTER.replace("def add(a, b):", "def add(a, b:")
    fake.push(fenced(broken), "text:no", fenced(AFTER))
    result = run(pipe(client, ["fake"]),
                 EditRequest("doc", texts={"app.py": BEFORE}, strategy="whole_file"))
    assert result.status == "failed"
    assert "does not parse" in (result.trace[-1].reason or "")


def test_missing_key_falls_back_to_next_target(fake: FakeFrontier) -> None:
    from tests.pipeline.conftest import fake_config

    cfg = fake_config(fake)
    client = FrontierClient(cfg.models, cfg.frontier, cfg.env_refs)
    fake.push(fenced(AFTER))
    result = run(pipe(client, ["keyless", "fake"]),
                 EditRequest("doc", texts={"app.py": BEFORE}, strategy="whole_file"))
    assert result.status == "applied" and result.model == "fake"
    assert result.trace[0].outcome == "skipped" and "OPENAI_API_KEY" in (result.trace[0].reason or "")


def test_no_model_answering_says_why_once_per_model(fake: FakeFrontier) -> None:
    from tests.pipeline.conftest import fake_config

    cfg = fake_config(fake)
    client = FrontierClient(cfg.models, cfg.frontier, cfg.env_refs)
    result = run(pipe(client, ["keyless"]), EditRequest("doc", texts={"app.py": BEFORE}))
    assert result.status == "failed" and fake.requests == []
    reason = result.reason or ""
    assert reason.startswith("no frontier model answered: keyless: ")
    assert "OPENAI_API_KEY" in reason and reason.count("keyless:") == 1, reason


def test_provider_error_is_a_trace_entry(client: FrontierClient, fake: FakeFrontier) -> None:
    fake.push("401")
    result = run(pipe(client, ["fake"]),
                 EditRequest("doc", texts={"app.py": BEFORE}, strategy="sketch"))
    assert result.status == "failed"
    assert result.trace[0].outcome == "error" and "key" in (result.trace[0].reason or "")


def test_replay_frontier_answers_each_format(client: FrontierClient) -> None:
    store = ReplayStore()
    store.add(ReplayTask("t1", "app.py", BEFORE, AFTER, "python"))
    install(store)
    pipeline = pipe(client, ["replay"])
    out = {}
    for strategy in ("sketch", "search_replace", "whole_file", "cascade"):
        result = run(pipeline, EditRequest("add a docstring", texts={"app.py": BEFORE},
                                           strategy=strategy, replay_task="t1"))
        assert result.status == "applied" and result.files["app.py"] == AFTER, strategy
        assert result.mode == "replay"
        step = result.trace[0]
        assert step.latency_kind == "modelled" and step.cost_usd > 0
        out[strategy] = step.output_tokens
    assert out["whole_file"] > out["sketch"] > 0, out


def test_replay_without_a_task_answers_prose(client: FrontierClient) -> None:
    install(ReplayStore())
    result = run(pipe(client, ["replay"]),
                 EditRequest("x", texts={"app.py": BEFORE}, replay_task="missing"))
    assert result.status == "failed"
    assert all(s.outcome != "ok" for s in result.trace if s.stage == "apply")


def test_unindexed_repo_is_indexed_and_retrieval_picks_the_file(
        client: FrontierClient, fake: FakeFrontier, tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    (repo / "other.py").write_text("def unrelated_parser(tokens):\n    return list(tokens)\n")
    fake.push(fenced(make_sketch(BEFORE, AFTER, "python", k=1).text))
    pipeline = pipe(client, ["fake"], retriever=retriever(tmp_path))
    result = run(pipeline, EditRequest("greet with a docstring: say hello", repo=str(repo)))
    retrieve = result.trace[0]
    assert retrieve.stage == "retrieve" and "was not indexed" in (retrieve.reason or "")
    assert retrieve.detail["hits"], "the index answered"
    assert result.status == "applied" and result.files["app.py"] == AFTER


def test_unindexed_repo_without_auto_index_says_how(client: FrontierClient, fake: FakeFrontier,
                                                     tmp_path: Path) -> None:
    repo = repo_with_app(tmp_path)
    pipeline = pipe(client, ["fake"], retriever=retriever(tmp_path), auto_index=False)
    result = run(pipeline, EditRequest("doc", repo=str(repo)))
    assert result.status == "failed"
    assert "complement index" in (result.trace[0].reason or "")
    assert fake.requests == []


def test_search_replace_parsing_and_matching() -> None:
    answer = "Here you go:\napp.py\n<<<<<<< SEARCH\n    return a + b\n=======\n" \
             "    return a - b\n>>>>>>> REPLACE\n"
    blocks = parse_search_replace(answer)
    assert blocks == [("app.py", "    return a + b\n", "    return a - b\n")]
    text, why = apply_search_replace(BEFORE, blocks[0][1], blocks[0][2])
    assert why is None and "return a - b" in (text or "")
    two = "    print(greet(\"world\"))\n    print(add(1, 2))\n"
    assert apply_search_replace(BEFORE, two, "    x\n")[0] == BEFORE.replace(two, "    x\n")
    assert apply_search_replace(BEFORE + BEFORE, "def add(a, b):\n", "x")[1] == \
        "SEARCH text occurs 2 times"
    assert apply_search_replace(BEFORE, "nowhere\n", "x")[1].startswith("SEARCH text not found")
    # whole lines only: "x = 1" is not the end of "max = 1" (it was: a line cut in two)
    assert apply_search_replace("max = 1\n", "x = 1\n", "x = 2\n")[0] is None
    assert apply_search_replace(BEFORE, "print(", "x")[0] is None
    # one indentation shift for the lines found and the new ones alike
    dedented = apply_search_replace(BEFORE, "return a + b\n", "return a - b\n")[0]
    assert dedented == BEFORE.replace("return a + b", "return a - b")
    trailing = apply_search_replace(BEFORE, "def add(a, b):   \n", "def add(a, c):\n")
    assert trailing[1] is None


def test_fences_with_backticks_inside_round_trip() -> None:
    from router.replay import fence

    body = "x = '```'\n"
    assert parse_blocks(fence(body, "python", "a.py")) == [("a.py", body)]


def test_merge_checks_catch_invented_lines_and_unshown_deletions() -> None:
    from router.edit.verify import invented_lines as _invented_lines
    from router.edit.verify import unexplained_deletion as _unexplained_deletion

    sketch = "def add(a, b):\n    return a - b\n# ... existing code ...\n"
    good = BEFORE.replace("return a + b", "return a - b")
    assert _invented_lines(BEFORE, good, sketch) == []
    assert _unexplained_deletion(BEFORE, good, sketch) is None
    reindented = good.replace("    return a - b", "        return a - b")
    assert _invented_lines(BEFORE, reindented, sketch) == ["        return a - b"]
    lost_main = good.replace('def main():\n    print(greet("world"))\n    print(add(1, 2))\n\n\n',
                             "")
    assert "neither shows" in (_unexplained_deletion(BEFORE, lost_main, sketch) or "")
    named = sketch + "# remove main\n"
    assert _unexplained_deletion(BEFORE, lost_main, named) is None


def test_model_applier_runs_after_an_abstain_before_search_replace(
        client: FrontierClient, fake: FakeFrontier) -> None:
    from specialists.apply import ApplyResult

    seen = []

    def model_applier(original, sketch, language, path):  # type: ignore[no-untyped-def]
        seen.append(sketch)
        return ApplyResult("applied", merged=AFTER, path=path)

    fake.push(fenced(UNPLACEABLE))
    pipeline = pipe(client, ["fake"], model_applier=model_applier)
    assert pipeline.chain("cascade") == ["sketch", "model_apply", "search_replace", "whole_file"]
    result = run(pipeline, EditRequest("doc", texts={"app.py": BEFORE}))
    assert result.status == "applied" and result.format == "model_apply"
    assert seen == [UNPLACEABLE] and len(fake.requests) == 1, "no second frontier call"
