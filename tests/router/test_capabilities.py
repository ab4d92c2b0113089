"""Optional capabilities are declared beside the contract (``specialists.base``), worked out
once when the registry builds a specialist, and read by the router, which no longer probes
a specialist with ``getattr`` on the request path (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

from router.registry import Registry
from specialists.apply.specialist import ApplySpecialist
from specialists.base import (AnswersAsync, Batched, Canaries, Closable, HasWorkers, HoldsPolicy,
                              LearnsOutcomes, Rooted, Swappable, WaitsReady, capabilities)
from specialists.tab import TabSpecialist
from retrieval.specialist import RetrievalSpecialist

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_specialists_offer_what_they_implement() -> None:
    assert capabilities(TabSpecialist()) == {Batched, HasWorkers, Swappable, HoldsPolicy,
                                             Canaries, Closable, LearnsOutcomes}
    assert capabilities(ApplySpecialist()) == frozenset()
    assert capabilities(RetrievalSpecialist()) == {WaitsReady, Rooted}
    assert AnswersAsync not in capabilities(TabSpecialist())


def test_the_registry_works_them_out_once_at_load() -> None:
    tab = TabSpecialist()
    assert "_capabilities" not in tab.__dict__
    Registry({"tab": tab})
    assert tab.__dict__["_capabilities"] == capabilities(tab)


def test_no_router_module_probes_a_specialist_by_name() -> None:
    """A probe names a method as a string (``getattr(spec, "swap", None)``); the Ray
    stand-in's table of forwarded methods, built once at load from the class, is not one."""
    spec = r"(spec|tab|retriever|self\.spec|applier|klass|getattr\(self, [\"']spec[\"'], None\))"
    probe = re.compile(r"\b(getattr|hasattr)\(" + spec + r", [\"']")
    assert probe.search('close = getattr(getattr(self, "spec", None), "close", None)')
    found = [f"{p.relative_to(REPO)}:{n}" for p in (REPO / "router").rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if probe.search(line)]
    assert found == [], found
