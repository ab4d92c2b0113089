"""POST /v1/apply and `complement apply` take the applier the YAML names; swapping it in
the config changes /v1/apply, /v1/edit and the CLI alike."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from router.app import create_app
from router.cli import main as cli_main
from router.config import load_config
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier
from tests.pipeline.conftest import fenced

ORIGINAL = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
SKETCH = "# ... existing code ...\ndef g():\n    return 20\n"
MERGED = ORIGINAL.replace("return 2", "return 20")
REAL_APPLIER = "specialists.apply.specialist:ApplySpecialist"
SMALL_APPLIER = "tests.router.swap_specialists:LineReverser"


def write_config(tmp_path: Path, applier: str, fake: FakeFrontier | None = None,
                 options: dict | None = None) -> Path:
    data: dict = {"data_dir": str(tmp_path / "data"),
                  "specialists": {"apply": {"class": applier, "options": options or {}}}}
    if fake is not None:
        data["models"] = {"fake": {"model": "openai/fake-sonnet", "api_base": fake.url,
                                   "api_key": "k", "input_cost_per_token": 1e-6,
                                   "output_cost_per_token": 1e-6}}
        data["routes"] = {"edit": {"targets": ["fake"]}}
        data["frontier"] = {"retry": {"attempts": 1}}
    path = tmp_path / f"{applier.rsplit(':', 1)[-1]}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_post_apply_one_file_several_files_and_bad_requests(tmp_path: Path) -> None:
    with running(create_app(load_config(write_config(tmp_path, REAL_APPLIER)))) as base:
        one = httpx.post(f"{base}/v1/apply", timeout=30,
                         json={"original": ORIGINAL, "sketch": SKETCH, "path": "m.py"})
        several = httpx.post(f"{base}/v1/apply", timeout=30, json={"files": [
            {"original": ORIGINAL, "sketch": SKETCH, "path": "a.py"},
            {"original": "", "sketch": "# ...\nx\n", "path": "b.py"}]})
        missing = httpx.post(f"{base}/v1/apply", json={"sketch": "x"})
        unknown = httpx.post(f"{base}/v1/apply", json={"original": "", "sketch": "x", "y": 1})
    assert one.status_code == 200 and one.json()["status"] == "applied"
    assert one.json()["files"][0]["merged"] == MERGED
    assert one.json()["diff"].startswith("diff --git")
    body = several.json()
    assert several.status_code == 200 and body["status"] == "abstained"
    assert body["files"][1]["reason"] and body["files"][0]["status"] == "applied"
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "original"
    assert missing.json()["error"]["type"] == "invalid_request_error"
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "y"


def test_swapping_the_applier_in_yaml_changes_apply_and_edit(fake: FakeFrontier,
                                                             tmp_path: Path) -> None:
    original, sketch = "a = 0\nb = 0\n", "a = 1\nb = 2\n"
    answers = {}
    for applier in (REAL_APPLIER, SMALL_APPLIER):
        fake.push(fenced(sketch, "m.py"))
        config = load_config(write_config(tmp_path, applier, fake))
        with running(create_app(config)) as base:
            applied = httpx.post(f"{base}/v1/apply", timeout=30,
                                 json={"original": original, "sketch": sketch, "path": "m.py"})
            edited = httpx.post(f"{base}/v1/edit", timeout=60, json={
                "instruction": "set a and b", "route": "edit", "strategy": "sketch",
                "texts": {"m.py": original}})
        assert applied.status_code == 200 and edited.status_code == 200, edited.text
        answers[applier] = (applied.json()["files"][0]["merged"],
                            edited.json()["files"].get("m.py"))
    assert answers[REAL_APPLIER] == (sketch, sketch)
    assert answers[SMALL_APPLIER] == ("b = 2\na = 1\n", "b = 2\na = 1\n")


def test_cli_apply_prints_merged_file_diff_and_exit_codes(tmp_path: Path, capsys) -> None:
    config = str(write_config(tmp_path, REAL_APPLIER))
    original, sketch = tmp_path / "m.py", tmp_path / "s.py"
    original.write_text(ORIGINAL)
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch), "-c", config]) == 0
    assert capsys.readouterr().out == MERGED
    assert cli_main(["apply", str(original), str(sketch), "--diff", "--path", "m.py",
                     "-c", config]) == 0
    assert capsys.readouterr().out.startswith("diff --git a/m.py b/m.py")
    # without --path: a path a patch tool can use, not a/ + an absolute path (issue 40)
    assert cli_main(["apply", str(original), str(sketch), "--diff", "-c", config]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header == "diff --git a/m.py b/m.py", header  # tmp_path is outside the cwd
    assert cli_main(["apply", str(original), str(sketch), "--no-cross-check", "-c", config]) == 0
    assert capsys.readouterr().out == MERGED
    sketch.write_text("# ...\nno_anchor_here()\n# ...\n")
    assert cli_main(["apply", str(original), str(sketch), "-c", config]) == 3
    assert "abstained" in capsys.readouterr().err
    assert cli_main(["apply", str(tmp_path / "missing.py"), str(sketch), "-c", config]) == 2
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch), "--write", "-c", config]) == 0
    assert original.read_text() == MERGED


def test_a_multi_file_diff_through_post_apply_and_the_cli(tmp_path: Path, capsys) -> None:
    # one diff for two files, sent as each file's sketch: each gets its own part; the
    # answer's line numbers are off (a model's), the hunks still land
    other = "A = 1\nB = 2\n"
    diff = ("Here is the change:\n```diff\n--- a/m.py\n+++ b/m.py\n@@ -20,2 +20,2 @@\n"
            " def g():\n-    return 2\n+    return 20\n--- a/k.py\n+++ b/k.py\n"
            "@@ -1,2 +1,2 @@\n A = 1\n-B = 2\n+B = 3\n```\n")
    with running(create_app(load_config(write_config(tmp_path, REAL_APPLIER)))) as base:
        r = httpx.post(f"{base}/v1/apply", timeout=30, json={"files": [
            {"original": ORIGINAL, "sketch": diff, "path": "m.py"},
            {"original": other, "sketch": diff, "path": "k.py"}]})
    body = r.json()
    assert r.status_code == 200 and body["status"] == "applied", body
    assert [f["merged"] for f in body["files"]] == [MERGED, "A = 1\nB = 3\n"]
    assert body["diff"].count("diff --git") == 2
    original, answer = tmp_path / "m.py", tmp_path / "answer.md"
    original.write_text(ORIGINAL)
    answer.write_text(diff)
    config = str(write_config(tmp_path, REAL_APPLIER))
    assert cli_main(["apply", str(original), str(answer), "-c", config]) == 0
    assert capsys.readouterr().out == MERGED


def test_cli_apply_uses_the_default_config_and_the_swapped_applier(tmp_path: Path,
                                                                   capsys) -> None:
    original, sketch = tmp_path / "m.py", tmp_path / "s.py"
    original.write_text(ORIGINAL)
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch)]) == 0, "configs/default.yaml"
    assert capsys.readouterr().out == MERGED
    swapped = str(write_config(tmp_path, SMALL_APPLIER))
    assert cli_main(["apply", str(original), str(sketch), "-c", swapped]) == 0
    assert capsys.readouterr().out == "".join(reversed(SKETCH.splitlines(keepends=True)))


def test_cli_apply_refuses_a_bad_option_by_name(tmp_path: Path, capsys) -> None:
    bad = str(write_config(tmp_path, REAL_APPLIER, options={"max_delete_shar": 0.5}))
    original = tmp_path / "m.py"
    original.write_text(ORIGINAL)
    assert cli_main(["apply", str(original), str(original), "-c", bad]) == 2
    assert "specialists.apply.options.max_delete_shar: unknown option" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [{"max_delete_share": "lots"}, {"max_delete_share": 2},
                                 {"cross_chek": True}, {"model_options": "fast"}])
def test_config_check_rejects_a_bad_specialist_option_and_names_it(
        tmp_path: Path, capsys, bad: dict) -> None:
    path = write_config(tmp_path, REAL_APPLIER, options=bad)
    assert cli_main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"specialists.apply.options.{next(iter(bad))}" in err
    good = write_config(tmp_path, REAL_APPLIER, options={"max_delete_share": 0.5})
    assert cli_main(["config", "check", str(good)]) == 0
