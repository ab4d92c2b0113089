"""Probes for issue 41's findings, one module each; see ``common.py`` for what they count.

``PROBES`` names each finding's probe module; ``run_all`` runs them in order under one
temporary folder each and returns their tallies.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from typing import Callable

from benchmarks.security.common import Tally

__all__ = ["PROBES", "run_all"]

#: finding -> module under benchmarks.security with ``probe(tmp: Path) -> Tally``
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
    tallies = []
    for finding, module in PROBES.items():
        if only and finding not in only:
            continue
        probe = importlib.import_module(f"benchmarks.security.{module}").probe
        with tempfile.TemporaryDirectory(prefix=f"complement-sec-{finding}-") as tmp:
            tally = probe(Path(tmp))
        if progress is not None:
            progress(f"{finding}: {tally.attempts} attempts, {tally.leaks} leaks, "
                     f"{tally.writes_outside} writes outside, {tally.commands_run} commands "
                     f"run, {len(tally.failures)} failures {tally.failures[:3]}")
        tallies.append(tally)
    return tallies
