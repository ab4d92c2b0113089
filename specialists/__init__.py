"""In-house specialists: small, fast models and deterministic tools behind one contract."""

from specialists.base import Result, Specialist, SpecialistError

__all__ = ["Result", "Specialist", "SpecialistError"]
