"""The small contract every specialist follows, and the error types it may raise.

A specialist is a class named in config by import string (``specialists.apply:ApplySpecialist``)
or by an entry point in the ``complement.specialists`` group. The registry validates its
config block's ``options`` against the class's ``Options`` model (a typo or a wrong type
fails at load, naming the field), builds it with those options as keyword arguments, calls
``setup()`` once at start-up (load models there, not in ``__init__``), then ``answer()`` per
request.

Every answer carries a confidence or an explicit abstain with a reason, so the router can
escalate instead of passing on a guess.

Errors know nothing of HTTP; the router maps each type to a status in one table
(``router.errors.SPECIALIST_STATUS``)::

    SpecialistError          the request cannot be taken as it is (bad input)   → 400
    ├── NotFoundError        what the request names does not exist             → 404
    ├── ForbiddenError       a path outside the allowed roots, a refused action → 403
    ├── ConflictError        it contradicts what was recorded before           → 409
    ├── UnavailableError     not ready (still loading, failed to load)         → 503
    └── OptionsError         a bad option in the specialist's config block     (at load)

This module imports nothing of the project: ``specialists.*`` and ``retrieval`` build on it,
and the router builds on all of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = [
    "AnswersAsync",
    "Batched",
    "Canaries",
    "Closable",
    "ConflictError",
    "HasWorkers",
    "HoldsPolicy",
    "LearnsOutcomes",
    "ReportsSwaps",
    "Rooted",
    "Swappable",
    "WaitsReady",
    "capabilities",
    "ForbiddenError",
    "NotFoundError",
    "OptionsError",
    "Result",
    "Specialist",
    "SpecialistError",
    "SpecialistOptions",
    "UnavailableError",
    "validate_options",
]


class SpecialistError(Exception):
    """A request a specialist cannot take at all (bad input).

    ``param`` names the request field at fault, when one is.
    """

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class NotFoundError(SpecialistError):
    """What the request names (an id, a version, a directory) does not exist."""


class ForbiddenError(SpecialistError):
    """A path outside the allowed roots, or an action the configuration does not allow."""


class ConflictError(SpecialistError):
    """The request contradicts what was recorded before (a used id, a second outcome)."""


class UnavailableError(SpecialistError):
    """The specialist cannot answer now: still loading, or failed to load."""


class OptionsError(SpecialistError):
    """A config block's options do not fit the specialist (raised at load, not per request)."""


class SpecialistOptions(BaseModel):
    """A specialist's typed options: its YAML ``options`` block, validated at load.

    Subclasses declare one field per constructor keyword; unknown keys are refused.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class _AnyOptions(SpecialistOptions):
    """For specialists that declare no options model: anything goes to the constructor."""

    model_config = ConfigDict(extra="allow")


def validate_options(klass: type["Specialist"], options: Mapping[str, Any],
                     where: str = "options") -> dict[str, Any]:
    """``options`` checked against ``klass.Options``: the keyword arguments to build it with.

    Only the keys the block set are passed on (the constructor's defaults stay in charge),
    with the types the model coerced them to. Raises ``OptionsError`` naming each bad field
    as ``where.field``.
    """
    model = getattr(klass, "Options", None) or _AnyOptions
    try:
        parsed = model.model_validate(dict(options))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                known = ", ".join(sorted(model.model_fields)) or "none"
                msg = f"unknown option (known: {known})"
            value = err.get("input")
            shown = "" if isinstance(value, (dict, list)) or err["type"] == "extra_forbidden" \
                else f" (got {value!r})"
            problems.append(f"{where}.{loc}: {msg}{shown}" if loc else f"{where}: {msg}")
        raise OptionsError("; ".join(problems)) from None
    values = parsed.model_dump(exclude_unset=True)
    values.update(parsed.model_extra or {})
    return values


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
    #: The typed options (its YAML ``options``); ``None``: any keywords, unchecked.
    Options: ClassVar[type[SpecialistOptions] | None] = None

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


# -- optional capabilities ------------------------------------------------------------------
# The contract is ``answer``; a specialist may also offer any of these. The router asks
# ``capabilities(spec)`` (worked out once per specialist, when the registry builds it) and
# calls only what is there, so no endpoint probes a specialist by name on the request path.


@runtime_checkable
class AnswersAsync(Protocol):
    """Answers without a thread of the caller's: a specialist in another process."""

    async def answer_async(self, request: Mapping[str, Any]) -> Result: ...


@runtime_checkable
class Batched(Protocol):
    """Takes requests into its own model worker, which batches them: ``done(result)`` is
    called from that worker, with a :class:`Result` or the exception raised."""

    def submit(self, request: Mapping[str, Any], done: Callable[[Any], None]) -> None: ...


@runtime_checkable
class HasWorkers(Protocol):
    """Starts its worker threads or processes before the server says it is ready."""

    def start_workers(self) -> None: ...


@runtime_checkable
class Swappable(Protocol):
    """Serves another policy from now on, without a restart; returns the version replaced."""

    def swap(self, policy: Any) -> int: ...


@runtime_checkable
class HoldsPolicy(Protocol):
    """Holds its policy in this process (a remote one is followed through its board)."""

    policy: Any


@runtime_checkable
class Canaries(Protocol):
    """Serves a second policy to a share of the editors (``None``: end it)."""

    def set_canary(self, policy: Any | None, share: float = 0.0) -> None: ...


@runtime_checkable
class ReportsSwaps(Protocol):
    """Says which of its replicas switched when, after a swap."""

    def swap_report(self) -> dict[str, Any]: ...


@runtime_checkable
class WaitsReady(Protocol):
    """Has work of its own to finish before its answers are whole (an index building)."""

    def wait_ready(self, timeout: float | None = None) -> None: ...


@runtime_checkable
class Rooted(Protocol):
    """Reads only under one directory (``None``: none configured)."""

    allowed_root: Any


@runtime_checkable
class Closable(Protocol):
    """Has threads, processes or files to stop when the server does."""

    def close(self) -> None: ...


@runtime_checkable
class LearnsOutcomes(Protocol):
    """Keeps what became of what it showed (the feedback on a request id) for its own
    features: the Tab specialist's per-session history (``specialists.tab.personal``).
    False: not a request this process answered."""

    def record_outcome(self, request_id: str, outcome: str, chars_accepted: int | None = None) -> bool: ...


CAPABILITIES: tuple[type, ...] = (AnswersAsync, Batched, HasWorkers, Swappable, HoldsPolicy,
                                  Canaries, ReportsSwaps, WaitsReady, Rooted, Closable, LearnsOutcomes)


def capabilities(spec: Any) -> frozenset[type]:
    """The optional capabilities ``spec`` offers (of :data:`CAPABILITIES`), worked out on
    the first call and kept on the instance."""
    found = spec.__dict__.get("_capabilities")
    if found is None:
        found = frozenset(c for c in CAPABILITIES if isinstance(spec, c))
        spec.__dict__["_capabilities"] = found
    return found  # type: ignore[no-any-return]
