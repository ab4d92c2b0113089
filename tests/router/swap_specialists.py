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


class LineReverser(Specialist):
    """A small applier for the swap test: the sketch's lines in reverse order. Every line
    it writes is one the sketch wrote, so the edit cascade's checks let it through, and no
    real applier would answer the same."""

    kind = "apply"
    version = "reverse-lines-1"

    def answer(self, request: Mapping[str, Any]) -> Result:
        lines = str(request["sketch"]).splitlines(keepends=True)
        merged = "".join(line if line.endswith("\n") else line + "\n" for line in reversed(lines))
        out = {"path": request.get("path"), "status": "applied", "merged": merged,
               "reason": None, "span": None, "stats": {"by": self.version}}
        return Result(output={"files": [out], "diff": ""}, confidence=1.0)


class Raiser(Specialist):
    """Raises the specialist error its request names (``sketch``), for the status table."""

    kind = "apply"

    def answer(self, request: Mapping[str, Any]) -> Result:
        import specialists.base as base

        raise getattr(base, str(request["sketch"]))("raised on purpose", param="sketch")


class SlowStarter(Specialist):
    """Loads in the background for ``seconds`` (as the retriever builds its embedder)."""

    kind = "chat"

    def __init__(self, seconds: float = 1.0) -> None:
        super().__init__(seconds=seconds)
        self.seconds = seconds
        self._done = False

    def setup(self) -> None:
        import threading
        import time

        def load() -> None:
            time.sleep(self.seconds)
            self._done = True

        threading.Thread(target=load, daemon=True).start()

    def health(self) -> dict[str, Any]:
        return {"ok": True, "loading": not self._done, "version": self.version}

    def answer(self, request: Mapping[str, Any]) -> Result:
        return Result(output="ready", confidence=1.0)


class Sleeper(Specialist):
    """Answers after ``seconds``, having written its process id to ``mark`` (when given) as
    it starts: a test kills its replica once a call is surely in its hands."""

    kind = "chat"
    version = "sleep-1"

    def __init__(self, seconds: float = 1.5, mark: str | None = None) -> None:
        super().__init__(seconds=seconds, mark=mark)
        self.seconds = seconds
        self.mark = mark

    def answer(self, request: Mapping[str, Any]) -> Result:
        import os
        import time

        if self.mark:
            with open(self.mark, "w") as fh:
                fh.write(str(os.getpid()))
        time.sleep(self.seconds)
        return Result(output=f"slept in {os.getpid()}", confidence=1.0)
