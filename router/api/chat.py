"""``POST /v1/chat/completions``: OpenAI-compatible, streaming and not, through a route.

Every response says which route and model served it, what it cost and how long it took:
in ``x-complement-*`` headers and in a ``complement`` field of the body that OpenAI
clients ignore (for streams, in the last chunk before ``[DONE]``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, AsyncIterator, Literal

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from router.api.jsonbody import json_int
from router.errors import BadRequest, ComplementError, UnknownRoute, decode_error, invalid_body
from router.frontier import translate
from router.keys import charge_of
from router.provider_params import allowed_params, check_request_params
from router.routing import RouteOutcome

__all__ = ["ChatRequest", "router"]

router = APIRouter()


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[Any] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat request. Other fields are model parameters passed on to the provider
    (``router.provider_params``; the schema lists them); any other field is a 400."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    # read by the router (the budget's worst case), so typed here
    max_tokens: json_int(ge=1) | None = None  # type: ignore[valid-type]
    max_completion_tokens: json_int(ge=1) | None = None  # type: ignore[valid-type]


async def parse_json_body(request: Request) -> Any:
    """The body as JSON, decoded by orjson; a 400 as every endpoint says it otherwise."""
    raw = await request.body()
    if not raw:
        raise BadRequest("the request body is empty; send a JSON object", param="body")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise decode_error({"loc": ("body", exc.pos), "ctx": {"error": exc.msg}},
                            raw) from None


def validation_error(exc: ValidationError, model: Any = None) -> BadRequest:
    """``exc`` said as every endpoint says it (``router.errors.invalid_body``)."""
    return invalid_body(exc.errors(), model)


def _chat_invalid(exc: ValidationError, body: Any, extra_allowed: list[str]) -> BadRequest:
    """A chat body that does not validate: its problems and, with them, the fields that are
    neither the request's nor a model parameter this server passes on (the check that runs
    after validation would name them next, one round trip later)."""
    allowed = allowed_params(extra_allowed)
    errors = list(exc.errors())
    if isinstance(body, dict):
        errors += [{"type": "extra_forbidden", "loc": (name,)} for name in body
                   if name not in ChatRequest.model_fields and name not in allowed]
    return invalid_body(errors, ChatRequest, also_known=sorted(allowed))


def _route_headers(out: RouteOutcome, latency_s: float | None) -> dict[str, str]:
    headers = {"x-complement-route": out.route, "x-complement-model": out.target}
    if latency_s is not None:
        headers["x-complement-latency-ms"] = f"{latency_s * 1000:.1f}"
        headers["x-complement-cost-usd"] = ("unknown" if out.cost_usd is None
                                            else f"{out.cost_usd:.8f}")
    return headers


def _complement_field(request: Request, out: RouteOutcome, latency_s: float) -> dict[str, Any]:
    models = request.app.state.config.models
    provider_model = models[out.target].model if out.target in models else None
    return {"route": out.route, "model": out.target, "provider_model": provider_model,
            "cost_usd": out.cost_usd, "latency_ms": round(latency_s * 1000, 3),
            "trace": out.trace_dicts()}


def _as_dict(obj: Any) -> dict[str, Any]:
    """A provider's completion or chunk as a dict: as parsed (HTTP), or litellm's object."""
    return obj if isinstance(obj, dict) else obj.model_dump(exclude_none=True)


def _completion_body(out: RouteOutcome) -> dict[str, Any]:
    if out.response is not None:
        body = {k: v for k, v in _as_dict(out.response).items() if k in _OPENAI_KEYS}
        body["model"] = out.target
        return body
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": out.target,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": out.text or ""}}],
            "usage": usage}


_TYPED_PARAMS = ("max_tokens", "max_completion_tokens")
_OPENAI_KEYS = {"id", "object", "created", "model", "choices", "usage", "system_fingerprint",
                "service_tier"}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request) -> Response:
    state = request.app.state
    started = time.monotonic()
    body = await parse_json_body(request)
    try:
        chat = ChatRequest.model_validate(body)
    except ValidationError as exc:
        raise _chat_invalid(exc, body, state.config.frontier.allowed_params) from None
    if chat.model not in state.config.routes:
        raise UnknownRoute(f"unknown route {chat.model!r}; use one of "
                           f"{sorted(state.config.routes)} (GET /v1/models lists them)",
                           param="model")
    messages = [m.model_dump(exclude_none=True) for m in chat.messages]
    params = dict(chat.model_extra or {})
    params.update({name: getattr(chat, name) for name in _TYPED_PARAMS
                   if getattr(chat, name) is not None})
    check_request_params(params, state.config.frontier.allowed_params,  # issue 41, F1
                         request_fields=ChatRequest.model_fields)
    wants_usage = bool(chat.stream_options and chat.stream_options.include_usage)
    charge = charge_of(request)
    if charge is not None:  # a virtual key: its routes, and its budget's worst case held
        charge.allow_route(chat.model)
        await charge.reserve(state.router.worst_case_usd(chat.model, messages, params),
                             state.config.routes[chat.model].budget.latency_s or 600.0)
    try:
        out = await state.router.run(chat.model, messages, params, stream=chat.stream)
    except ComplementError as exc:
        state.metrics.observe(chat.model, "none", exc.status_code,
                              time.monotonic() - started, None)
        raise
    if chat.stream:
        if charge is not None:
            charge.deferred = True  # settled by the stream, before its end
        headers = _route_headers(out, None)
        return StreamingResponse(_sse(request, out, started, wants_usage),
                                 media_type="text/event-stream", headers=headers)
    latency = time.monotonic() - started
    body = _completion_body(out)
    body["complement"] = _complement_field(request, out, latency)
    request.state.complement_cost_usd = out.cost_usd  # the key's charge (router.keys)
    request.state.complement_tokens = int((body.get("usage") or {}).get("total_tokens") or 0)
    state.metrics.observe(out.route, out.target, 200, latency, out.cost_usd, out.trace)
    return Response(orjson.dumps(body), media_type="application/json",
                    headers=_route_headers(out, latency))


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk_dict(chunk: Any, model: str) -> dict[str, Any]:
    body = {k: v for k, v in _as_dict(chunk).items() if k in _OPENAI_KEYS}
    body["object"] = "chat.completion.chunk"
    body["model"] = model
    for choice in body.get("choices", []):
        delta = choice.get("delta") or {}
        choice["delta"] = {k: v for k, v in delta.items()
                           if k in ("role", "content", "tool_calls", "refusal")}
    return body


async def _sse(request: Request, out: RouteOutcome, started: float,
               wants_usage: bool) -> AsyncIterator[bytes]:
    """Relay the stream; on a mid-stream failure send an error event, never a half answer
    passed off as whole."""
    state = request.app.state
    usage: dict[str, int] = {}
    status = 200
    if out.stream is None:  # buffered (a specialist, or a verified cascade): one chunk
        for body in _buffered_chunks(out):
            yield _event(body)
    else:
        handle = out.stream
        try:
            yield _event(_chunk_dict(handle.first, out.target))
            async for chunk in handle.rest:
                body = _chunk_dict(chunk, out.target)
                if body.get("usage"):
                    usage = body["usage"]
                    if not wants_usage:
                        body.pop("usage")
                        if not body.get("choices"):
                            continue
                yield _event(body)
        except Exception as exc:  # upstream broke mid-stream: tell the client, in band
            error = translate(exc, out.target)
            status = 502
            yield _event(error.to_openai())
        finally:
            closer = getattr(handle.rest, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:  # the upstream connection is already gone
                    pass
        if usage:
            out.cost_usd = (out.cost_usd or 0.0) + (state.router.frontier.cost_usd(
                out.target, usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0)) or 0.0)
    charge = charge_of(request)
    if charge is not None:  # before the summary: a client that saw the end was charged
        await charge.settle(out.cost_usd, int(usage.get("total_tokens") or 0))
    latency = time.monotonic() - started
    yield _event({"id": "complement-summary", "object": "chat.completion.chunk",
                  "created": int(time.time()), "model": out.target, "choices": [],
                  "complement": _complement_field(request, out, latency)})
    yield b"data: [DONE]\n\n"
    state.metrics.observe(out.route, out.target, status, latency, out.cost_usd, out.trace)


def _buffered_chunks(out: RouteOutcome) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": out.target}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                     "content": out.text or ""},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
