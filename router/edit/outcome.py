"""What an edit request says, and what its answer carries: the result and its trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EditRequest", "EditResult", "Step"]


@dataclass
class Step:
    """One entry of the trace."""

    stage: str  # retrieve | frontier | apply | verify | write
    outcome: str  # ok | abstained | failed | error | skipped
    format: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    latency_kind: str = "measured"  # measured | modelled (replay frontier)
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class EditRequest:
    instruction: str
    repo: str | None = None
    files: list[str] = field(default_factory=list)
    """Paths (relative to ``repo``) the model may edit; empty: chosen by retrieval."""
    texts: dict[str, str] = field(default_factory=dict)
    """Inline file contents by path (no repository needed); override files on disk."""
    strategy: str = "cascade"
    write: bool = False
    replay_task: str | None = None
    """Key of a recorded task for the replay frontier; ignored by real providers."""
    context_k: int = 6


@dataclass
class EditResult:
    status: str  # applied | failed
    route: str
    strategy: str
    mode: str  # replay | real
    diff: str = ""
    files: dict[str, str] = field(default_factory=dict)
    format: str | None = None
    """The format whose answer was accepted."""
    model: str | None = None
    reason: str | None = None
    written: list[str] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return sum(s.cost_usd for s in self.trace)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.trace)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.trace)

    @property
    def latency_s(self) -> float:
        return sum(s.latency_s for s in self.trace)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(cost_usd=round(self.cost_usd, 8), output_tokens=self.output_tokens,
                    prompt_tokens=self.prompt_tokens, latency_s=round(self.latency_s, 6))
        return data
