"""The small contract every specialist follows.

A specialist is a class named in config by import string (``specialists.apply:Applier``)
or by an entry point in the ``complement.specialists`` group. The registry builds it from
its config block (``options`` become constructor keyword arguments), calls ``setup()`` once
at start-up (load models there, not in ``__init__``), then ``answer()`` per request.

Every answer carries a confidence or an explicit abstain with a reason, so the router can
escalate instead of passing on a guess.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Result", "Specialist", "SpecialistError"]


class SpecialistError(Exception):
    """A request a specialist cannot take at all (bad input); maps to HTTP 400."""


@dataclass
class Result:
    """What a specialist answers: an output with a confidence, or an abstain with a reason."""

    output: Any = None
    confidence: float | None = None
    abstained: bool = False
    reason: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def abstain(cls, reason: str, **meta: Any) -> "Result":
        return cls(abstained=True, reason=reason, meta=dict(meta))


class Specialist(ABC):
    """Base class: subclasses implement ``answer``; ``setup`` and ``health`` are optional."""

    #: Registry name of the kind of work it does (``tab``, ``apply``, ``retrieval``, ``chat``).
    kind: str = "generic"
    version: str = "0"

    def __init__(self, **options: Any) -> None:
        self.options = options

    def setup(self) -> None:
        """Load models and indexes. Called once, before the first ``answer``."""

    @abstractmethod
    def answer(self, request: Mapping[str, Any]) -> Result:
        """Answer one request, or abstain with a reason."""

    def health(self) -> dict[str, Any]:
        """Readiness and version, reported by ``/readyz`` and ``complement doctor``."""
        return {"ok": True, "version": self.version}
