"""`complement edit` against the fake frontier: the diff on stdout, the trace on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from router.cli import main
from specialists.apply import make_sketch
from tests.fakes.fake_frontier import FakeFrontier
from tests.pipeline.conftest import AFTER, BEFORE, fenced


def write_config(fake: FakeFrontier, tmp_path: Path) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"),
        "frontier": {"retry": {"attempts": 1}},
        "models": {"fake": {"model": "openai/fake-sonnet", "api_base": fake.url, "api_key": "k",
                            "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5}},
        "routes": {"auto": {"targets": ["fake"]}},
        "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}))
    return cfg


def test_edit_command_prints_diff_and_writes_only_when_asked(
        fake: FakeFrontier, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(BEFORE)
    cfg = write_config(fake, tmp_path)
    sketch = fenced(make_sketch(BEFORE, AFTER, "python", k=1).text)
    fake.push(sketch, sketch)
    argv = ["edit", "add a docstring to greet", "--repo", str(repo), "--file", "app.py",
            "-c", str(cfg)]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert '+    """Say hello."""' in out.out and "applied via sketch" in out.err
    assert "model=fake" in out.err and (repo / "app.py").read_text() == BEFORE
    assert main(argv + ["--write"]) == 0
    assert (repo / "app.py").read_text() == AFTER


def test_edit_command_failure_exits_1(fake: FakeFrontier, tmp_path: Path,
                                      capsys: pytest.CaptureFixture) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text(BEFORE)
    fake.push("text:no", "text:no", "text:no")
    assert main(["edit", "x", "--repo", str(repo), "--file", "app.py",
                 "-c", str(write_config(fake, tmp_path))]) == 1
    assert "every step of the chain failed" in capsys.readouterr().err
