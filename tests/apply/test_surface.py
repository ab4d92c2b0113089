"""The apply specialist as a library (its HTTP endpoint and CLI: tests/router/test_apply_surface.py)."""

from __future__ import annotations

import pytest

from specialists.apply import ApplySpecialist

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


def test_cross_check_is_a_config_option() -> None:
    assert ApplySpecialist().apply_options.cross_check is True
    spec = ApplySpecialist(cross_check=False)
    assert spec.apply_options.cross_check is False
    result = spec.answer({"original": ORIGINAL, "sketch": SKETCH, "path": "m.py"})
    assert not result.abstained and result.output["files"][0]["merged"] == MERGED
