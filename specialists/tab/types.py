"""What Tab serves: the request an editor sends at a trigger point and the suggestion it gets.

The live specialist (``specialists.tab.specialist``) parses an HTTP body into a
:class:`TabRequest` and answers with a :class:`Suggestion`; the policy, the features and the
rules read them. The simulator (``specialists.tab.replay``) makes the same requests from a
replayed edit and judges the same suggestions: it imports these types, never the other way
round (an import-linter contract, ``pyproject.toml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RecentEdit", "Suggestion", "TabRequest", "TRIGGER_CHARS", "parse_diff"]

TRIGGER_CHARS = frozenset(" .(_=,[{:")
"""After these characters an editor asks (``CALIBRATION.md``'s protocol; the replay's too)."""


@dataclass(frozen=True)
class RecentEdit:
    """An edit the person made a moment ago, at ``offset`` of the file as it was then."""

    old: str
    new: str
    offset: int = 0

    def diff(self) -> str:
        """The edit as diff lines (``-`` removed, ``+`` added), as Zeta's prompt shows it."""
        minus = "".join(f"-{ln}\n" for ln in self.old.splitlines())
        plus = "".join(f"+{ln}\n" for ln in self.new.splitlines())
        return f"@@ {self.offset} @@\n{minus}{plus}"

    def to_json(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "offset": self.offset}


@dataclass(frozen=True)
class Suggestion:
    """Replace ``[start, end)`` of the current file by ``text``; ``start == end`` at the cursor
    is a completion, anything else a next-edit rewrite. With ``jump`` it edits nothing: it
    says the next edit will be in ``[start, end)`` (a line region) and moves the cursor there."""

    start: int
    end: int
    text: str
    jump: bool = False

    @classmethod
    def from_output(cls, output: dict[str, Any] | None) -> "Suggestion | None":
        """The suggestion in a ``/v1/tab`` answer's ``suggestion`` (or a Tab result's
        ``output``); None for none. A ``kind: jump`` answer moves the cursor, edits nothing."""
        if not output:
            return None
        r = output["range"]
        return cls(r["start"], r["end"], output["text"], jump=output.get("kind") == "jump")

    @property
    def kind(self) -> str:
        """``jump``, ``insert`` (a completion) or ``rewrite``."""
        if self.jump:
            return "jump"
        return "insert" if self.start == self.end else "rewrite"

    def apply(self, file: str) -> str:
        if self.jump:
            return file
        return file[: self.start] + self.text + file[self.end :]


@dataclass
class TabRequest:
    """What an editor sends at a trigger point: the state the policy sees."""

    file: str
    cursor: int
    language: str
    path: str = ""
    recent_edits: list[RecentEdit] = field(default_factory=list)
    seconds_since_last: float | None = None
    """Seconds since the last decision (shown or not); ``None`` for the first request."""
    last_outcome: str | None = None
    """``accepted``, ``rejected`` or ``none`` (nothing shown) for the last request; ``None`` first."""
    request_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "cursor": self.cursor, "language": self.language,
                "path": self.path, "recent_edits": [e.to_json() for e in self.recent_edits],
                "seconds_since_last": self.seconds_since_last, "last_outcome": self.last_outcome,
                "request_id": self.request_id}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "TabRequest":
        edits = [RecentEdit(**e) if isinstance(e, dict) else parse_diff(str(e))
                 for e in body.get("recent_edits") or []]
        return cls(file=body["file"], cursor=int(body["cursor"]), language=body.get("language") or "",
                   path=body.get("path") or "", recent_edits=edits,
                   seconds_since_last=body.get("seconds_since_last"),
                   last_outcome=body.get("last_outcome"), request_id=body.get("request_id") or "")


def parse_diff(text: str) -> RecentEdit:
    """A diff string (``-``/``+`` lines) back into old/new text; other lines are ignored."""
    old = [ln[1:] for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return RecentEdit(old="\n".join(old), new="\n".join(new))
