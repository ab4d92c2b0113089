"""The security audit: a probe for each finding of issue 41, one module each; see
``common.py`` for what they count.

``PROBES`` names each finding's probe module; ``run_all`` runs them in order under one
temporary folder each and returns their tallies. Each probe starts its own servers on
loopback, with configs it writes, and attacks them as the finding was reproduced: it checks
this build and this machine (its sandbox, its limits), never a server already running.
``complement audit`` runs them and prints the tally; ``tests/security`` asserts each is
clean; ``benchmarks/reliability.py --only security`` reports the totals.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from typing import Any, Callable

from router.audit.common import Tally, offline_env

__all__ = ["PROBES", "run_all", "summary"]

#: finding -> module under router.audit with ``probe(tmp: Path) -> Tally``
PROBES: dict[str, str] = {
    "F1": "f1_provider_redirect",
    "F2": "f2_empty_host",
    "F3": "f3_edit_writes",
    "F4": "f4_verify_sandbox",
    "F5": "f5_read_race",
    "F6": "f6_default_root",
    "F7": "f7_csrf",
    "F8": "f8_session_seq",
    "F9": "f9_request_limits",
    "F10": "f10_slow_clients",
    "F11": "f11_disclosure",
}


def run_all(only: list[str] | None = None,
            progress: Callable[[str], None] | None = None) -> list[Tally]:
    offline_env()
    tallies = []
    for finding, module in PROBES.items():
        if only and finding not in only:
            continue
        probe = importlib.import_module(f"router.audit.{module}").probe
        with tempfile.TemporaryDirectory(prefix=f"complement-sec-{finding}-") as tmp:
            tally = probe(Path(tmp))
        if progress is not None:
            progress(f"{finding}: {tally.attempts} attempts, {tally.leaks} leaks, "
                     f"{tally.writes_outside} writes outside, {tally.commands_run} commands "
                     f"run, {len(tally.failures)} failures {tally.failures[:3]}")
        tallies.append(tally)
    return tallies


def summary(tallies: list[Tally]) -> dict[str, Any]:
    """Each probe's tally by name, and the totals over them."""
    return {"probes": {t.name: t.as_dict() for t in tallies},
            "attempts": sum(t.attempts for t in tallies),
            "leaks": sum(t.leaks for t in tallies),
            "writes_outside": sum(t.writes_outside for t in tallies),
            "commands_run": sum(t.commands_run for t in tallies),
            "failures": sum(len(t.failures) for t in tallies)}
