"""The specialist, POST /v1/apply and `complement apply`."""

from __future__ import annotations

from pathlib import Path

import pytest

from specialists.apply import ApplySpecialist
from specialists.apply.cli import main as cli_main

ORIGINAL = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
SKETCH = "# ... existing code ...\ndef g():\n    return 20\n"
MERGED = ORIGINAL.replace("return 2", "return 20")


def test_specialist_is_registry_loadable_and_answers() -> None:
    from router.registry import load_class

    klass = load_class("specialists.apply:ApplySpecialist")
    spec = klass(max_delete_share=0.5)
    spec.setup()
    assert spec.kind == "apply"
    result = spec.answer({"original": ORIGINAL, "sketch": SKETCH, "path": "m.py"})
    assert not result.abstained and result.output["files"][0]["merged"] == MERGED
    assert result.output["diff"].startswith("diff --git a/m.py b/m.py")


def test_specialist_abstains_when_any_file_does() -> None:
    spec = ApplySpecialist()
    result = spec.answer({"files": [
        {"original": ORIGINAL, "sketch": SKETCH, "path": "a.py"},
        {"original": ORIGINAL, "sketch": "# ...\nnothing_like_it()\n# ...\n", "path": "b.py"},
    ]})
    assert result.abstained and "b.py" in (result.reason or "")
    assert [f["status"] for f in result.output["files"]] == ["applied", "abstained"]
    assert "a/a.py" in result.output["diff"] and "b.py" not in result.output["diff"]


@pytest.mark.parametrize("bad", [{}, {"original": "x"}, {"files": []}, {"files": [{"original": 1, "sketch": "x"}]}])
def test_specialist_rejects_malformed_requests(bad: dict) -> None:
    from specialists.base import SpecialistError

    with pytest.raises(SpecialistError):
        ApplySpecialist().answer(bad)


@pytest.fixture()
def client():
    fastapi = pytest.importorskip("fastapi")
    from fastapi.responses import JSONResponse
    from fastapi.testclient import TestClient

    from router.errors import ComplementError
    from specialists.apply.api import router

    app = fastapi.FastAPI()
    app.include_router(router)

    @app.exception_handler(ComplementError)
    def _handle(_request, exc: ComplementError):  # the app's own handler does this (issue 2)
        return JSONResponse(exc.to_openai(), status_code=exc.status_code)

    return TestClient(app)


def test_post_apply_one_file(client) -> None:
    response = client.post("/v1/apply", json={"original": ORIGINAL, "sketch": SKETCH, "path": "m.py"})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "applied" and body["files"][0]["merged"] == MERGED
    assert body["diff"].startswith("diff --git")


def test_post_apply_several_files_and_abstain(client) -> None:
    response = client.post("/v1/apply", json={"files": [
        {"original": ORIGINAL, "sketch": SKETCH, "path": "a.py"},
        {"original": "", "sketch": "# ...\nx\n", "path": "b.py"},
    ]})
    body = response.json()
    assert response.status_code == 200 and body["status"] == "abstained"
    assert body["files"][1]["reason"] and body["files"][0]["status"] == "applied"


def test_post_apply_bad_request(client) -> None:
    response = client.post("/v1/apply", json={"sketch": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_cli_prints_merged_file_diff_and_exit_codes(tmp_path: Path, capsys) -> None:
    original, sketch = tmp_path / "m.py", tmp_path / "s.py"
    original.write_text(ORIGINAL)
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch)]) == 0
    assert capsys.readouterr().out == MERGED
    assert cli_main(["apply", str(original), str(sketch), "--diff", "--path", "m.py"]) == 0
    assert capsys.readouterr().out.startswith("diff --git a/m.py b/m.py")
    sketch.write_text("# ...\nno_anchor_here()\n# ...\n")
    assert cli_main(["apply", str(original), str(sketch)]) == 3
    assert "abstained" in capsys.readouterr().err
    assert cli_main(["apply", str(tmp_path / "missing.py"), str(sketch)]) == 2
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch), "--write"]) == 0
    assert original.read_text() == MERGED


def test_cross_check_is_a_config_option_and_a_cli_flag(tmp_path: Path, capsys) -> None:
    assert ApplySpecialist().apply_options.cross_check is True
    spec = ApplySpecialist(cross_check=False)
    assert spec.apply_options.cross_check is False
    result = spec.answer({"original": ORIGINAL, "sketch": SKETCH, "path": "m.py"})
    assert not result.abstained and result.output["files"][0]["merged"] == MERGED
    original, sketch = tmp_path / "m.py", tmp_path / "s.py"
    original.write_text(ORIGINAL)
    sketch.write_text(SKETCH)
    assert cli_main(["apply", str(original), str(sketch), "--no-cross-check"]) == 0
    assert capsys.readouterr().out == MERGED
