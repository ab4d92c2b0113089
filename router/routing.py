"""Routing policies: a route alias maps to a policy that picks targets for one request.

``POLICIES`` maps a config name to a class with one method, ``run``. A target is either a
frontier model (called through ``FrontierClient``) or a specialist of kind ``chat``.

- ``fixed``: the first target; the rest are fallbacks, tried when a target errors or
  abstains.
- ``cascade``: cheapest first; escalate when the target abstains, errors, or a verifier
  rejects its answer. The last target's answer stands even if a verifier rejects it (the
  trace says so).

Every outcome carries a trace: each target tried, why it was skipped or left, its cost and
latency. Budgets are enforced per request across all targets.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from router.errors import (
    BudgetExceeded,
    ComplementError,
    ConfigError,
    FrontierError,
    from_specialist,
)
from router.frontier import StreamHandle, classify, message_text, not_configured, translate
from router.learned import RouteClassifier, features_from_messages
from router.verifiers import build_verifier
from specialists.base import SpecialistError

if TYPE_CHECKING:
    from router.config import RouteConfig
    from router.frontier import FrontierClient
    from router.registry import Registry

__all__ = ["POLICIES", "Attempt", "CascadePolicy", "FixedPolicy", "LearnedPolicy",
           "RouteOutcome", "Router", "estimate_usd"]

DEFAULT_OUTPUT_TOKENS = 512
"""Output tokens assumed for a budget check when the request sets no max_tokens."""


@dataclass
class Attempt:
    target: str
    outcome: str
    """ok | error | abstained | rejected | skipped"""
    reason: str | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    tries: int = 0


@dataclass
class RouteOutcome:
    route: str
    target: str
    text: str | None
    response: Any = None
    """The frontier model's completion: litellm's ModelResponse, or a dict (HTTP)."""
    stream: StreamHandle | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    trace: list[Attempt] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def trace_dicts(self) -> list[dict[str, Any]]:
        return [asdict(a) for a in self.trace]


@dataclass
class _Request:
    route: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    stream: bool
    deadline: float | None
    spent: float = 0.0


class Router:
    """Holds the frontier client and the specialists; runs a route's policy."""

    def __init__(self, routes: dict[str, "RouteConfig"], frontier: "FrontierClient",
                 registry: "Registry") -> None:
        self.routes = routes
        self.frontier = frontier
        self.registry = registry
        self.policies = {name: POLICIES[cfg.policy](name, cfg, self)
                         for name, cfg in routes.items()}

    def live_reasons(self, route: str) -> list[str]:
        """Why each of a route's targets cannot answer now; empty when one can."""
        reasons = []
        for target in self.routes[route].targets:
            why = self.target_down(target)
            if why is None:
                return []
            reasons.append(f"{target}: {why}")
        return reasons

    def target_down(self, target: str) -> str | None:
        if target in self.frontier.models:
            return self.frontier.missing_key(target)
        if target in self.registry.errors:
            return f"failed to load: {self.registry.errors[target]}"
        return None

    def worst_case_usd(self, route: str, messages: list[dict[str, Any]],
                       params: dict[str, Any]) -> float:
        """What one request on ``route`` can cost at most: every frontier target tried
        (fallbacks, escalations) at the prompt's estimate and the output tokens asked for
        (a virtual key's budget holds this much while the request runs: ``router.keys``)."""
        return sum(estimate_usd(self.frontier, target, messages, params) or 0.0
                   for target in self.routes[route].targets)

    async def run(self, route: str, messages: list[dict[str, Any]], params: dict[str, Any],
                  stream: bool = False) -> RouteOutcome:
        cfg = self.routes[route]
        deadline = time.monotonic() + cfg.budget.latency_s if cfg.budget.latency_s else None
        request = _Request(route, messages, params, stream, deadline)
        return await self.policies[route].run(request)


def estimate_usd(frontier: "FrontierClient", target: str, messages: list[dict[str, Any]],
                 params: dict[str, Any]) -> float | None:
    """The worst-case cost of one call to ``target`` (None: not a frontier model, or one
    without prices): the prompt at a token per 4 characters (+8), and every output token
    asked for (``max_tokens``, else ``DEFAULT_OUTPUT_TOKENS``)."""
    if target not in frontier.models:
        return None
    prices = frontier.cost_per_token(target)
    if prices is None:
        return None
    prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 8
    out_tokens = int(params.get("max_tokens") or params.get("max_completion_tokens")
                     or DEFAULT_OUTPUT_TOKENS)
    return float(prompt_tokens * prices[0] + out_tokens * prices[1])


class _Policy:
    escalate_on_verify = False

    def __init__(self, name: str, cfg: "RouteConfig", router: Router) -> None:
        self.name = name
        self.cfg = cfg
        self.router = router
        self.verifiers = [build_verifier(v) for v in cfg.verify]

    async def run(self, req: _Request) -> RouteOutcome:
        trace: list[Attempt] = []
        down: list[str] = []
        last_error: ComplementError | None = None
        targets = self.cfg.targets
        for i, target in enumerate(targets):
            is_last = i == len(targets) - 1
            why = self.router.target_down(target)
            if why is None:
                why = self._over_budget(target, req)
                if why is not None:
                    trace.append(Attempt(target, "skipped", why))
                    last_error = BudgetExceeded(f"route {self.name!r}: {why}")
                    continue
            else:
                trace.append(Attempt(target, "skipped", why))
                down.append(f"{target}: {why}")
                continue
            outcome, error = await self._try(target, req, trace, is_last)
            if outcome is not None:
                outcome.trace = trace
                return outcome
            last_error = error or last_error
        if last_error is not None:
            last_error.extra.setdefault("complement", {"route": self.name,
                                                        "trace": [asdict(a) for a in trace]})
            raise last_error
        raise not_configured(self.name, down)

    def _over_budget(self, target: str, req: _Request) -> str | None:
        limit = self.cfg.budget.max_cost_usd
        if limit is None:
            return None
        estimate = estimate_usd(self.router.frontier, target, req.messages, req.params)
        if estimate is None:
            return None
        if req.spent + estimate > limit:
            return (f"worst-case cost ${estimate:.6f} (+${req.spent:.6f} spent) exceeds the "
                    f"route budget ${limit:.6f}")
        return None

    async def _try(self, target: str, req: _Request, trace: list[Attempt],
                   is_last: bool) -> tuple[RouteOutcome | None, ComplementError | None]:
        if target in self.router.frontier.models:
            return await self._try_model(target, req, trace, is_last)
        return await self._try_specialist(target, req, trace, is_last)

    async def _try_model(self, target: str, req: _Request, trace: list[Attempt],
                         is_last: bool) -> tuple[RouteOutcome | None, ComplementError | None]:
        frontier = self.router.frontier
        t0 = time.monotonic()
        buffered = not req.stream or (self.escalate_on_verify and bool(self.verifiers))
        try:
            if buffered:
                call = await frontier.complete(target, req.messages, req.params, req.deadline)
            else:
                handle = await frontier.open_stream(target, req.messages, req.params,
                                                    req.deadline)
        except Exception as exc:  # translated below: every upstream error has a table row
            if isinstance(exc, asyncio.CancelledError):
                raise
            error = translate(exc, target)
            tries = getattr(exc, "complement_tries", 0)
            trace.append(Attempt(target, "error", error.message,
                                 latency_ms=_ms(t0), tries=tries))
            policy_row = classify(exc)
            if not policy_row.fallback and not isinstance(error, FrontierError):
                raise error from exc
            return None, error
        latency = _ms(t0)
        if not buffered:
            trace.append(Attempt(target, "ok", latency_ms=latency, tries=handle.attempts))
            return RouteOutcome(self.name, target, None, stream=handle), None
        req.spent += call.cost_usd or 0.0
        text = message_text(call.response)
        attempt = Attempt(target, "ok", cost_usd=call.cost_usd, latency_ms=latency,
                          tries=call.attempts)
        if self._escalates(attempt, text, trace, is_last):
            return None, None
        return RouteOutcome(self.name, target, text, response=call.response, usage=call.usage,
                            cost_usd=req.spent), None

    async def _try_specialist(self, target: str, req: _Request, trace: list[Attempt],
                              is_last: bool) -> tuple[RouteOutcome | None, ComplementError | None]:
        from starlette.concurrency import run_in_threadpool

        spec = self.router.registry.get(target)
        t0 = time.monotonic()
        try:
            result = await run_in_threadpool(spec.answer, {"messages": req.messages,
                                                           "params": req.params})
        except (ComplementError, SpecialistError) as exc:
            error = from_specialist(exc) if isinstance(exc, SpecialistError) else exc
            trace.append(Attempt(target, "error", error.message, latency_ms=_ms(t0)))
            return None, error
        if result.abstained:
            trace.append(Attempt(target, "abstained", result.reason, latency_ms=_ms(t0)))
            return None, None
        text = str(result.output)
        attempt = Attempt(target, "ok", cost_usd=0.0, latency_ms=_ms(t0))
        if self._escalates(attempt, text, trace, is_last):
            return None, None
        return RouteOutcome(self.name, target, text, cost_usd=req.spent), None

    def _escalates(self, attempt: Attempt, text: str, trace: list[Attempt],
                   is_last: bool) -> bool:
        """Record an answer; True when a verifier rejects it and a later target remains.
        The last target's answer stands, with the rejection in its trace entry."""
        trace.append(attempt)
        rejected = self._verify(text) if self.escalate_on_verify else None
        if rejected and not is_last:
            attempt.outcome, attempt.reason = "rejected", rejected
            return True
        if rejected:
            attempt.reason = f"verifier rejected, but it is the last target: {rejected}"
        return False

    def _verify(self, text: str) -> str | None:
        for check in self.verifiers:
            why = check(text)
            if why:
                return why
        return None


class FixedPolicy(_Policy):
    """One target plus fallbacks: the next target is tried on an error or abstain."""


class CascadePolicy(_Policy):
    """Cheapest first; escalate on abstain, error, or a verifier's rejection."""

    escalate_on_verify = True


POLICIES: dict[str, type[_Policy]] = {"fixed": FixedPolicy, "cascade": CascadePolicy}


class LearnedPolicy:
    """The ``learned`` policy: the interface of ``_Policy`` (``run(req)``), over a
    classifier from ``router.learned``.

    P(cheap target succeeds) ≥ threshold → the targets as a cascade; else the last target.
    """

    def __init__(self, name: str, cfg: "RouteConfig", router: Any) -> None:
        path = getattr(cfg, "classifier", None)
        if not path:
            raise ConfigError(f"routes.{name}: a learned route needs 'classifier' (a file "
                              "written by `complement router train`)")
        self.name = name
        self.cfg = cfg
        self.classifier = RouteClassifier.load(path)
        set_threshold = getattr(cfg, "threshold", None)
        self.threshold = set_threshold if set_threshold is not None else self.classifier.threshold
        self.cheap = CascadePolicy(name, cfg, router)
        self.strong = FixedPolicy(name, cfg.model_copy(update={"targets": cfg.targets[-1:]}),
                                  router)

    async def run(self, req: Any) -> Any:
        p = self.classifier.predict(features_from_messages(req.messages))
        go_cheap = p >= self.threshold
        outcome = await (self.cheap if go_cheap else self.strong).run(req)
        why = (f"P(cheap succeeds)={p:.3f} {'≥' if go_cheap else '<'} threshold "
               f"{self.threshold:.3f}: " + ("cascade from the cheapest target" if go_cheap
                                            else f"straight to {self.cfg.targets[-1]}"))
        outcome.trace.insert(0, Attempt("learned", "ok", why))
        return outcome


POLICIES["learned"] = LearnedPolicy  # type: ignore[assignment]  # duck-types _Policy


def _ms(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 3)
