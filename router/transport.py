"""Direct HTTP to servers that speak OpenAI's chat completions API (vLLM, Ollama, LM Studio,
llama.cpp, gateways, fakes): one long-lived aiohttp connection pool per event loop, the
request body forwarded as JSON, the answer parsed once with orjson and handed on as a dict.
(aiohttp rather than httpx: on this path httpx costs about four times the CPU per call,
measured in ``BENCHMARKS.md``.)

litellm earns its cost where providers differ (Anthropic's message shapes, OpenAI's
parameter rules per model family); an OpenAI-compatible server needs none of that, and
``litellm.acompletion`` costs several milliseconds of CPU per call (its logging object,
cost lookup and the SDK's request building). ``FrontierClient`` sends a model here when its
``transport`` says ``http``, or says ``auto`` and the model is ``openai/...`` with an
``api_base`` of its own.

Failures are raised as :class:`ProviderError`, each naming its row of
``router.frontier.ERROR_TABLE`` (``RateLimitError``, ``Timeout``, ...), so retries,
fallbacks and the circuit breaker treat both transports alike.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, AsyncIterator, Mapping

import aiohttp
import orjson

__all__ = ["ProviderError", "HttpTransport", "OPENAI_BASE", "chat_url"]

OPENAI_BASE = "https://api.openai.com/v1"

#: HTTP status -> the ERROR_TABLE row it means (what litellm raises for the same status).
STATUS_ROWS = {400: "BadRequestError", 401: "AuthenticationError", 402: "PaymentRequiredError",
               403: "PermissionDeniedError", 404: "NotFoundError", 408: "Timeout",
               413: "BadRequestError", 422: "UnprocessableEntityError", 429: "RateLimitError",
               500: "InternalServerError", 502: "BadGatewayError",
               503: "ServiceUnavailableError", 504: "Timeout"}
_CONTEXT_HINTS = ("context_length_exceeded", "maximum context length", "context window",
                  "too many tokens")


class ProviderError(Exception):
    """What went wrong with a provider, and which row of the error table decides it."""

    def __init__(self, row: str, message: str, status_code: int | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.status_code = status_code
        self.litellm_response_headers = headers
        """The provider's headers, where ``retry_after_s`` looks (as on litellm's errors)."""


def chat_url(api_base: str | None) -> str:
    return (api_base or OPENAI_BASE).rstrip("/") + "/chat/completions"


def error_for(status: int, body: bytes, headers: Mapping[str, str] | None = None,
              reason: str = "") -> ProviderError:
    """The error for a provider's 4xx/5xx answer, its row chosen by status and message."""
    detail = ""
    try:
        parsed = orjson.loads(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict):
            detail = str(error.get("message") or error.get("code") or "")
        elif error:
            detail = str(error)
    except orjson.JSONDecodeError:
        detail = body[:200].decode("utf-8", "replace")
    row = STATUS_ROWS.get(status) or ("APIError" if status >= 500 else "BadRequestError")
    lowered = detail.lower()
    if status == 400 and any(hint in lowered for hint in _CONTEXT_HINTS):
        row = "ContextWindowExceededError"
    elif status == 400 and "content_policy" in lowered:
        row = "ContentPolicyViolationError"
    return ProviderError(row, f"HTTP {status}: {detail or reason or 'error'}", status, headers)


def _completion(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProviderError("APIResponseValidationError",
                            f"the answer is not JSON ({exc})") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
        raise ProviderError("APIResponseValidationError", "the answer has no 'choices' list")
    return parsed


def _network_error(exc: BaseException) -> ProviderError:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return ProviderError("Timeout", f"timed out ({type(exc).__name__})")
    return ProviderError("APIConnectionError", f"{type(exc).__name__}: {exc}")


_NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)


class HttpTransport:
    """Connection pools to OpenAI-compatible servers, one per event loop (tests and
    ``--workers`` run several); each pool keeps connections alive to every base URL."""

    def __init__(self, max_connections: int = 512) -> None:
        self.max_connections = max_connections
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                                  aiohttp.ClientSession] = \
            weakref.WeakKeyDictionary()

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=60)
            session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                            json_serialize=lambda o: orjson.dumps(o).decode())
            self._sessions[loop] = session
        return session

    @staticmethod
    def _headers(api_key: str | None, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {**(extra or {}), "content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    async def complete(self, url: str, api_key: str | None, payload: dict[str, Any],
                       timeout_s: float, headers: dict[str, str] | None = None
                       ) -> dict[str, Any]:
        try:
            async with self._session().post(
                    url, data=orjson.dumps(payload), headers=self._headers(api_key, headers),
                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                body = await response.read()
                if response.status >= 400:
                    raise error_for(response.status, body, response.headers,
                                    response.reason or "")
        except _NETWORK as exc:
            raise _network_error(exc) from None
        return _completion(body)

    async def stream(self, url: str, api_key: str | None, payload: dict[str, Any],
                     timeout_s: float, headers: dict[str, str] | None = None
                     ) -> AsyncIterator[dict[str, Any]]:
        """The stream's chunks as dicts. An error status, a chunk that is not JSON, an
        ``error`` event or an end before ``[DONE]`` raise ``ProviderError``; ``timeout_s``
        bounds the wait for each piece, not the whole stream."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        try:
            response = await self._session().post(
                url, data=orjson.dumps(payload), headers=self._headers(api_key, headers),
                timeout=timeout)
        except _NETWORK as exc:
            raise _network_error(exc) from None
        try:
            if response.status >= 400:
                raise error_for(response.status, await response.read(), response.headers,
                                response.reason or "")
            done = False
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, event names
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                try:
                    chunk = orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise ProviderError("APIResponseValidationError",
                                        f"a stream chunk is not JSON: {data[:120]!r}") from None
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise ProviderError("MidStreamFallbackError",
                                        f"the provider sent an error mid-stream: {message}")
                yield chunk
            if not done:
                raise ProviderError("MidStreamFallbackError", "the stream ended before [DONE]")
        except _NETWORK as exc:
            raise _network_error(exc) from None
        finally:
            response.release()

    async def aclose(self) -> None:
        """Close the pool of the running loop (the server's shutdown calls this)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()
