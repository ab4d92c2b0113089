"""Frontier client: every call to a frontier model goes out here, through
``litellm.acompletion``, or straight over HTTP for servers that speak OpenAI's API
(``router.transport``; the model's ``transport`` decides).

We own the retries. litellm's inner OpenAI client retries by default and ``num_retries``
stacks a second loop on top, so each call is made with ``max_retries=0`` and retried by
tenacity: exponential backoff with jitter, honouring Retry-After. Whether an error is worth
a retry, a fallback, or neither is decided by one table (``ERROR_TABLE``) keyed by litellm's
exception classes; a test fails when litellm grows a class the table does not list. The HTTP
transport's errors name their row of the same table.

A per-model circuit breaker stops hammering a failing provider and lets one probe through
after ``reset_after_s``.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

from router.errors import (
    BadRequest,
    CircuitOpen,
    ComplementError,
    FrontierError,
    FrontierNotConfigured,
    FrontierRateLimited,
    FrontierTimeout,
    Unauthorized,
)
from router.provider_params import provider_params
from router.transport import HttpTransport, ProviderError, chat_url

if TYPE_CHECKING:
    from router.config import FrontierConfig, ModelConfig

__all__ = [
    "ERROR_TABLE",
    "CallResult",
    "CircuitBreaker",
    "ErrorPolicy",
    "FrontierClient",
    "StreamHandle",
    "classify",
    "litellm_module",
    "message_text",
]

_litellm_lock = threading.Lock()


def litellm_module() -> Any:
    """Import litellm lazily (about 3 s), offline: local cost map, no hub lookups."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with _litellm_lock:
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        litellm.drop_params = True
    return litellm


@dataclass(frozen=True)
class ErrorPolicy:
    retry: bool
    """Worth another try on the same model (transient)."""
    fallback: bool
    """Worth trying the next model of the route (this model or provider is the problem)."""
    ours: type[ComplementError]
    message: str
    counts_for_circuit: bool = False


_T = FrontierError
_R = ErrorPolicy
# litellm exception class name -> what we do. Order does not matter; lookup walks the MRO.
ERROR_TABLE: dict[str, ErrorPolicy] = {
    "RateLimitError": _R(True, True, FrontierRateLimited, "the provider is rate limiting", True),
    "CallerCredentialRateLimitError": _R(True, True, FrontierRateLimited,
                                         "the provider is rate limiting this key", True),
    "InternalServerError": _R(True, True, _T, "the provider failed (5xx) or refused the "
                              "connection", True),
    "ServiceUnavailableError": _R(True, True, _T, "the provider is unavailable (503)", True),
    "BadGatewayError": _R(True, True, _T, "bad gateway at the provider (502)", True),
    "Timeout": _R(True, True, FrontierTimeout, "the provider timed out", True),
    "APIConnectionError": _R(True, True, _T, "cannot reach the provider", True),
    "APIResponseValidationError": _R(True, True, _T, "the provider sent a malformed "
                                     "response", True),
    "MidStreamFallbackError": _R(True, True, _T, "the stream broke off", True),
    "APIError": _R(True, True, _T, "the provider returned an error", True),
    "OpenAIError": _R(False, True, _T, "the provider returned an error"),
    "AuthenticationError": _R(False, True, Unauthorized, "the provider rejected the API key; "
                              "check the model's api_key in the config"),
    "CallerCredentialAuthenticationError": _R(False, True, Unauthorized,
                                              "the provider rejected the caller's credentials"),
    "PermissionDeniedError": _R(False, True, _T, "the key may not use this model"),
    "PaymentRequiredError": _R(False, True, _T, "the provider account needs payment"),
    "NotFoundError": _R(False, True, _T, "the provider does not know this model"),
    "ModelNotMappedError": _R(False, True, _T, "litellm has no mapping for this model"),
    "LiteLLMUnknownProvider": _R(False, True, _T, "unknown provider prefix in the model name"),
    "ContextWindowExceededError": _R(False, True, BadRequest, "the prompt is longer than the "
                                     "model's context window"),
    "ContentPolicyViolationError": _R(False, True, BadRequest, "the provider refused the "
                                      "content"),
    "EndpointNotSupportedByModelError": _R(False, True, _T, "the model does not support "
                                           "this endpoint"),
    "UnsupportedEndpointError": _R(False, True, _T, "unsupported endpoint"),
    "BudgetExceededError": _R(False, True, _T, "litellm budget exceeded"),
    "BadRequestError": _R(False, False, BadRequest, "the provider rejected the request"),
    "InvalidRequestError": _R(False, False, BadRequest, "invalid request"),
    "UnprocessableEntityError": _R(False, False, BadRequest, "the provider could not "
                                   "process the request"),
    "UnsupportedParamsError": _R(False, False, BadRequest, "a parameter is not supported"),
    "MalformedRequestFieldError": _R(False, False, BadRequest, "a request field is malformed"),
    "JSONSchemaValidationError": _R(False, False, BadRequest, "the answer failed its JSON "
                                    "schema"),
    "BlockedPiiEntityError": _R(False, False, BadRequest, "blocked by a PII guardrail"),
    "GuardrailRaisedException": _R(False, False, BadRequest, "blocked by a guardrail"),
    "SensitiveDataRouteException": _R(False, False, BadRequest, "sensitive data routing "
                                      "refused the request"),
    "RejectedRequestError": _R(False, False, BadRequest, "the request was rejected"),
    "ModifyResponseException": _R(False, False, _T, "a hook modified the response"),
    "ImageFetchError": _R(False, False, BadRequest, "an image in the request could not be "
                          "fetched"),
    "VectorStoreSearchError": _R(False, False, _T, "vector store search failed"),
    "MockException": _R(False, False, _T, "litellm mock exception"),
}
_UNKNOWN = ErrorPolicy(False, True, FrontierError, "the frontier call failed")
_RETRYABLE_OS = ErrorPolicy(True, True, FrontierError, "network error", True)


def classify(exc: BaseException) -> ErrorPolicy:
    """The table's row for an exception, found along its class hierarchy."""
    if isinstance(exc, CircuitOpen):
        return ErrorPolicy(False, True, CircuitOpen, exc.message)
    if isinstance(exc, ProviderError):
        return ERROR_TABLE[exc.row]
    for klass in type(exc).__mro__:
        if klass.__module__.startswith(("litellm", "openai")) and klass.__name__ in ERROR_TABLE:
            return ERROR_TABLE[klass.__name__]
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return ERROR_TABLE["Timeout"]
    if isinstance(exc, (ConnectionError, OSError)):
        return _RETRYABLE_OS
    return _UNKNOWN


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms`` or ``retry-after``)."""
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class CircuitBreaker:
    """closed → (N consecutive failures) → open → (reset_after_s) → half-open: one probe."""

    def __init__(self, failure_threshold: int, reset_after_s: float) -> None:
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self.failures = 0
        self.opened_at: float | None = None
        self.probing = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if time.monotonic() - self.opened_at >= self.reset_after_s:
            return "half-open"
        return "open"

    def before_call(self, name: str) -> None:
        state = self.state
        if state == "open" or (state == "half-open" and self.probing):
            wait = self.reset_after_s - (time.monotonic() - (self.opened_at or 0))
            raise CircuitOpen(f"model {name!r} failed {self.failures} times in a row; its "
                              f"circuit is open for another {max(wait, 0):.1f}s")
        if state == "half-open":
            self.probing = True

    def success(self) -> None:
        self.failures, self.opened_at, self.probing = 0, None, False

    def failure(self) -> None:
        self.failures += 1
        self.probing = False
        if self.failures >= self.failure_threshold:
            self.opened_at = time.monotonic()


@dataclass
class CallResult:
    response: Any
    """litellm ``ModelResponse``."""
    model: str
    cost_usd: float | None
    attempts: int
    latency_s: float
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class StreamHandle:
    """An open stream whose first chunk has arrived: from here on we are committed."""

    first: Any
    rest: AsyncIterator[Any]
    model: str
    attempts: int
    started: float


class FrontierClient:
    """Calls configured frontier models with retries, circuit breaking and cost accounting."""

    def __init__(self, models: dict[str, "ModelConfig"], settings: "FrontierConfig",
                 env_refs: dict[str, list[str]] | None = None) -> None:
        self.models = models
        self.settings = settings
        self.env_refs = env_refs or {}
        self.breakers = {name: CircuitBreaker(settings.circuit.failure_threshold,
                                              settings.circuit.reset_after_s)
                         for name in models}
        self._registered = False
        self.http = HttpTransport()
        self._prices: dict[str, tuple[float, float] | None] = {}

    # -- configuration ----------------------------------------------------------------
    def missing_key(self, name: str) -> str | None:
        """Why model ``name`` cannot be called now (no key), naming what to set; else None."""
        cfg = self.models[name]
        if not cfg.requires_key or cfg.api_key:
            return None
        variables = self.env_refs.get(f"models.{name}.api_key")
        if variables:
            return f"set {' or '.join(variables)} (models.{name}.api_key)"
        return f"set models.{name}.api_key in the config"

    def _register_prices(self) -> None:
        if self._registered:
            return
        litellm = litellm_module()
        prices = {}
        for cfg in self.models.values():
            if cfg.input_cost_per_token is not None or cfg.output_cost_per_token is not None:
                provider = cfg.model.split("/", 1)[0] if "/" in cfg.model else "openai"
                entry = {"input_cost_per_token": cfg.input_cost_per_token or 0.0,
                         "output_cost_per_token": cfg.output_cost_per_token or 0.0,
                         "litellm_provider": provider, "mode": "chat"}
                prices[cfg.model] = entry
                prices[cfg.model.split("/", 1)[-1]] = entry
        if prices:
            litellm.register_model(prices)
        self._registered = True

    def cost_per_token(self, name: str) -> tuple[float, float] | None:
        """(input, output) USD per token for a model, from config or litellm's local map."""
        if name not in self._prices:
            self._prices[name] = self._look_up_prices(name)
        return self._prices[name]

    def _look_up_prices(self, name: str) -> tuple[float, float] | None:
        cfg = self.models[name]
        if cfg.input_cost_per_token is not None or cfg.output_cost_per_token is not None:
            return cfg.input_cost_per_token or 0.0, cfg.output_cost_per_token or 0.0
        litellm = litellm_module()
        for key in (cfg.model, cfg.model.split("/", 1)[-1]):
            info = litellm.model_cost.get(key)
            if info:
                return (float(info.get("input_cost_per_token") or 0.0),
                        float(info.get("output_cost_per_token") or 0.0))
        return None

    def cost_usd(self, name: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        prices = self.cost_per_token(name)
        if prices is None:
            return None
        return prompt_tokens * prices[0] + completion_tokens * prices[1]

    async def aclose(self) -> None:
        """Close the running loop's connections (the server's shutdown calls this)."""
        await self.http.aclose()

    # -- calls --------------------------------------------------------------------------
    def _passed_on(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """What a caller's ``params`` may send to a provider: model parameters only (the API
        refuses the rest with a 400 first; this is the second line, issue 41 F1)."""
        return provider_params(params or {}, self.settings.allowed_params)

    def _kwargs(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any],
                timeout_s: float) -> dict[str, Any]:
        cfg = self.models[name]
        kwargs: dict[str, Any] = {**cfg.params, **params}
        kwargs.update(model=cfg.model, messages=messages, timeout=timeout_s,
                      max_retries=0, num_retries=0)
        if cfg.api_key:
            kwargs["api_key"] = cfg.api_key
        elif not cfg.requires_key:
            kwargs["api_key"] = "not-needed"
        if cfg.api_base:
            kwargs["api_base"] = cfg.api_base
        return kwargs

    async def _with_retries(self, name: str, attempt_fn: Any, deadline: float | None) -> Any:
        """Run ``attempt_fn`` under the retry policy; returns (result, attempts)."""
        from tenacity import (
            AsyncRetrying,
            RetryCallState,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential_jitter,
        )

        retry_cfg = self.settings.retry
        breaker = self.breakers[name]
        backoff = wait_exponential_jitter(initial=retry_cfg.backoff_initial_s,
                                          max=retry_cfg.backoff_max_s)

        def should_retry(exc: BaseException) -> bool:
            if not classify(exc).retry:
                return False
            wait = retry_after_s(exc)
            return wait is None or wait <= retry_cfg.retry_after_max_s

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            asked = retry_after_s(exc) if exc else None
            delay = asked if asked is not None else backoff(state)
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise FrontierTimeout(f"the latency budget runs out before model {name!r} "
                                      f"may be retried") from exc
            return delay

        attempts = 0
        try:
            async for attempt in AsyncRetrying(retry=retry_if_exception(should_retry),
                                               stop=stop_after_attempt(retry_cfg.attempts),
                                               wait=wait, reraise=True):
                with attempt:
                    attempts += 1
                    breaker.before_call(name)
                    try:
                        result = await attempt_fn(self._timeout(name, deadline))
                    except Exception as exc:
                        if classify(exc).counts_for_circuit:
                            breaker.failure()
                        raise
                    breaker.success()
                    return result, attempts
        except Exception as exc:
            try:  # the trace reports how many calls the provider saw
                exc.complement_tries = attempts  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _timeout(self, name: str, deadline: float | None) -> float:
        timeout = self.models[name].timeout_s
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrontierTimeout("the route's latency budget is spent")
            timeout = min(timeout, remaining)
        return timeout

    def _http_call(self, name: str, messages: list[dict[str, Any]],
                   params: dict[str, Any]) -> tuple[str, str | None, dict[str, Any],
                                                    dict[str, str]]:
        """(url, key, body, extra headers) for a model called straight over HTTP."""
        cfg = self.models[name]
        body: dict[str, Any] = {**cfg.params, **params}
        headers = {str(k): str(v) for k, v in (body.pop("extra_headers", None) or {}).items()}
        body["model"] = cfg.model.removeprefix("openai/")
        body["messages"] = messages
        return chat_url(cfg.api_base), cfg.api_key, body, headers

    async def complete(self, name: str, messages: list[dict[str, Any]],
                       params: dict[str, Any] | None = None,
                       deadline: float | None = None) -> CallResult:
        """One non-streaming completion from model ``name``, retried per the policy.

        ``response`` is litellm's ``ModelResponse``, or for the HTTP transport the
        provider's JSON as a dict (``message_text`` reads either)."""
        started = time.monotonic()
        params = self._passed_on(params)
        if self.models[name].speaks_http():
            url, key, body, headers = self._http_call(name, messages, params)

            async def attempt(timeout_s: float) -> Any:
                return await self.http.complete(url, key, body, timeout_s, headers)
        else:
            litellm = litellm_module()
            self._register_prices()

            async def attempt(timeout_s: float) -> Any:
                return await litellm.acompletion(**self._kwargs(name, messages, params,
                                                                timeout_s))

        response, attempts = await self._with_retries(name, attempt, deadline)
        usage = _usage_dict(response.get("usage") if isinstance(response, dict)
                            else getattr(response, "usage", None))
        cost = self.cost_usd(name, usage.get("prompt_tokens", 0),
                             usage.get("completion_tokens", 0))
        return CallResult(response, name, cost, attempts, time.monotonic() - started, usage)

    async def open_stream(self, name: str, messages: list[dict[str, Any]],
                          params: dict[str, Any] | None = None,
                          deadline: float | None = None) -> StreamHandle:
        """Open a stream and wait for its first chunk, retrying until then.

        Retries and fallbacks can only happen before the first byte reaches the client;
        waiting for the first chunk here is what lets a fallback fire on streaming requests.
        """
        started = time.monotonic()
        stream_params = {**self._passed_on(params), "stream": True,
                         "stream_options": {"include_usage": True}}
        if self.models[name].speaks_http():
            url, key, body, headers = self._http_call(name, messages, stream_params)

            async def open_once(timeout_s: float) -> Any:
                return self.http.stream(url, key, body, timeout_s, headers)
        else:
            litellm = litellm_module()
            self._register_prices()

            async def open_once(timeout_s: float) -> Any:
                return await litellm.acompletion(**self._kwargs(name, messages, stream_params,
                                                                timeout_s))

        async def attempt(timeout_s: float) -> tuple[Any, Any]:
            iterator = (await open_once(timeout_s)).__aiter__()
            try:
                first = await iterator.__anext__()
            except StopAsyncIteration:
                raise ProviderError("APIResponseValidationError",
                                    "the stream ended before its first chunk") from None
            if _ends_unsaid(first):
                raise ProviderError("MidStreamFallbackError",
                                    "the stream ended before its first chunk") from None
            return first, iterator

        (first, rest), attempts = await self._with_retries(name, attempt, deadline)
        return StreamHandle(first, rest, name, attempts, started)


def _ends_unsaid(chunk: Any) -> bool:
    """A first chunk that already finishes, with no role and no content: litellm's stand-in
    for a stream that closed before sending anything (a real empty answer starts with the
    assistant's role). Passed on, it would be a 200 with an empty answer and no fallback."""
    body = chunk if isinstance(chunk, dict) else chunk.model_dump(exclude_none=True)
    choices = body.get("choices") or []
    return bool(choices) and all(
        isinstance(c, dict) and c.get("finish_reason") and not any(
            (c.get("delta") or {}).get(k) for k in ("role", "content", "tool_calls"))
        for c in choices)


def message_text(response: Any) -> str:
    """The assistant's text in a completion: litellm's ``ModelResponse`` or a JSON dict."""
    try:
        if isinstance(response, dict):
            return response["choices"][0]["message"].get("content") or ""
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""


def _usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    out = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, key, None) if not isinstance(usage, dict) else usage.get(key)
        if isinstance(value, int):
            out[key] = value
    return out


def translate(exc: BaseException, name: str) -> ComplementError:
    """A litellm (or network) error as one of ours, with a message a person can act on."""
    if isinstance(exc, ComplementError):
        return exc
    policy = classify(exc)
    detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return policy.ours(f"model {name!r}: {policy.message} ({detail})",
                       code=type(exc).__name__)


def not_configured(route: str, reasons: list[str]) -> FrontierNotConfigured:
    return FrontierNotConfigured(f"route {route!r} has no live target: " + "; ".join(reasons))
