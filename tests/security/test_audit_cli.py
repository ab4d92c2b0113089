"""``complement audit`` runs the probes of ``router/audit`` and prints their tally."""

from __future__ import annotations

import json

import pytest

from router.cli import main


def test_audit_prints_a_clean_tally_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--findings", "f9"]) == 0
    out, err = capsys.readouterr()
    tally = json.loads(out)
    assert len(tally["probes"]) == 1 and tally["attempts"] > 0
    assert (tally["leaks"], tally["writes_outside"], tally["commands_run"], tally["failures"]) == (0, 0, 0, 0)
    assert err.startswith("F9: ")


def test_audit_names_the_findings_it_knows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--findings", "F1,F99"]) == 2
    err = capsys.readouterr().err
    assert "F99" in err and "F11" in err
