"""Ready means ready: /readyz is 503 while any specialist loads, 200 once all answer, and
`complement doctor` says the same."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import yaml

from router.app import create_app
from router.cli import main as cli_main
from router.config import load_config
from tests.conftest import running


def _config(tmp_path: Path, seconds: float) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"),
        "specialists": {"slow": {"class": "tests.router.swap_specialists:SlowStarter",
                                 "options": {"seconds": seconds}},
                        "apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}))
    return path


def test_readyz_is_503_while_a_specialist_loads_and_200_after(tmp_path: Path) -> None:
    with running(create_app(load_config(_config(tmp_path, 2.0)))) as base:
        first = httpx.get(f"{base}/readyz")
        assert first.status_code == 503, first.text
        body = first.json()
        assert body["status"] == "loading" and body["specialists"]["slow"]["loading"] is True
        assert body["specialists"]["apply"]["ok"] is True
        assert httpx.get(f"{base}/healthz").status_code == 200, "alive while loading"
        deadline = time.monotonic() + 30
        while (r := httpx.get(f"{base}/readyz")).status_code != 200:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)
        assert r.json()["status"] == "ready"


def test_doctor_reports_loading_then_ready(tmp_path: Path, capsys) -> None:
    config = str(_config(tmp_path, 3.0))
    assert cli_main(["doctor", "-c", config, "--wait", "0"]) == 0
    out = capsys.readouterr().out
    assert "specialists: loading" in out and "LOADING" in out
    assert cli_main(["doctor", "-c", config, "--wait", "30"]) == 0
    out = capsys.readouterr().out
    assert "specialists: ready" in out and "LOADING" not in out
