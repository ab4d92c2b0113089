"""Two interchangeable chat specialists for the config-swap test: same kind, two behaviours."""

from __future__ import annotations

from typing import Any, Mapping

from specialists.base import Result, Specialist


def _last_user(request: Mapping[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1].get("content", "")) if users else ""


class Shouter(Specialist):
    kind = "chat"
    version = "shout-1"

    def __init__(self, suffix: str = "!") -> None:
        super().__init__(suffix=suffix)
        self.suffix = suffix

    def answer(self, request: Mapping[str, Any]) -> Result:
        return Result(output=_last_user(request).upper() + self.suffix, confidence=1.0)


class Reverser(Specialist):
    kind = "chat"
    version = "reverse-1"

    def answer(self, request: Mapping[str, Any]) -> Result:
        text = _last_user(request)
        if not text:
            return Result.abstain("nothing to reverse")
        return Result(output=text[::-1], confidence=0.9)


class Abstainer(Specialist):
    """Always says it does not know, so a cascade must escalate."""

    kind = "chat"

    def answer(self, request: Mapping[str, Any]) -> Result:
        return Result.abstain("this specialist never answers")


class Broken(Specialist):
    kind = "chat"

    def setup(self) -> None:
        raise RuntimeError("weights file is corrupt")

    def answer(self, request: Mapping[str, Any]) -> Result:  # pragma: no cover - never ready
        return Result(output="unreachable")
