"""``POST /v1/tab``: a suggestion (range + text) or an explicit nothing; and the online
loop's ``POST /v1/tab/deploy`` (hot swap), ``POST /v1/tab/canary`` (a candidate served to a
share of the editors; ``/promote`` deploys it, ``/abort`` ends it) and ``GET
/v1/tab/versions`` (their record).

The running server's specialist of kind ``tab`` answers, from the registry through the
``uses("tab")`` dependency; deploys, canaries and the versions' record are the Tab
service's (``router.service.tab``, on ``app.state.tab_service``), which these endpoints call. :func:`create_app` builds a standalone app around one
specialist, for tests and for serving Tab alone.

Every answer carries the request id, the policy version and the latency. Bad input is a
4xx (400 for a malformed body or a cursor outside the file) or an explicit
``suggestion: null`` with a ``reason`` (empty, binary or non-UTF-8 content, a request
made stale by a newer one from the same ``session``); never a 500.
"""

from __future__ import annotations

import asyncio
import json

import orjson
from typing import Any, Literal, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from router.api.jsonbody import EscapedSurrogatesRoute, json_int
from router.registry import specialist_for, uses
from router.service.tab import TabService, action_record, log_action
from specialists.base import AnswersAsync, Batched, Specialist, capabilities

__all__ = ["router", "CanaryBody", "DeployBody", "TabBody", "TabEdit", "TabFastLane",
           "answer_async", "create_app", "tab_response"]

router = APIRouter(tags=["tab"], route_class=EscapedSurrogatesRoute)


class TabEdit(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    old: str = ""
    new: str = ""
    offset: json_int() = 0  # type: ignore[valid-type]


class TabBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    file: str = Field(description="The document's text; only a window around the cursor is read.")
    cursor: json_int(ge=0) = Field(  # type: ignore[valid-type]
        description="Offset of the cursor in 'file', in characters: 0..len(file); past the "
                    "end is a 400.")
    language: str = ""
    path: str = ""
    recent_edits: list[Union[TabEdit, str]] = Field(default_factory=list, max_length=64,
                                                    description="The last edits, as {old, new} or diff text.")
    open_files: list[str] = Field(default_factory=list, max_length=32,
                                  description="Other open files' texts: a context-copy source.")
    seconds_since_last: float | None = Field(default=None, ge=0)
    last_outcome: Literal["accepted", "rejected", "none"] | None = None
    request_id: str | None = Field(default=None, max_length=200)
    session: str | None = Field(default=None, max_length=200,
                                description="Editor/document id: a newer 'seq' cancels older pending "
                                            "requests; during a canary it keeps to one version.")
    project: str | None = Field(default=None, max_length=200,
                                description="The repository or workspace the document is in: the "
                                            "server keeps what it showed and what was kept per "
                                            "project as well as per session, and the policy reads "
                                            "both (issue 35). Unset: one history for every project.")
    explain: bool = Field(default=False,
                          description="Also answer why: the candidates weighed, the policy's most "
                                      "likely actions with their probabilities, its version, and "
                                      "the rule that decided, if one did.")
    seq: json_int(ge=0, le=2**53 - 1) | None = Field(  # type: ignore[valid-type]
                            default=None,
                            description="Per session, higher = newer. A lower seq after a pause"
                                        " (options.session_restart_s) restarts the session.")


@router.post("/v1/tab", response_model=None)
async def tab(body: TabBody, request: Request, spec: Specialist = Depends(uses("tab"))
              ) -> JSONResponse:
    """Answer one keystroke's request. The model runs on the specialist's own worker thread,
    which batches concurrent requests (issue 17); this coroutine only waits for its result,
    so the event loop never waits on torch. The decision is in the event store before the
    answer leaves (feedback for its request_id finds it). :class:`TabFastLane` answers the
    same requests without FastAPI's layers; this route is its fallback and the schema."""
    return await _answer(body, request.app.state, spec)


async def _answer(body: TabBody, state: Any, spec: Any) -> JSONResponse:
    payload = body.model_dump()
    payload["recent_edits"] = [e.model_dump() if isinstance(e, TabEdit) else e for e in body.recent_edits]
    result = await answer_async(spec, payload)
    await _log_async(state, result)
    # a plain JSON dump: FastAPI's validation and encoding of a dict[str, Any] return value
    # cost more than the dump itself, once per keystroke
    return JSONResponse(tab_response(result))


class TabFastLane:
    """``POST /v1/tab`` without FastAPI's routing, dependency solving and exception layers
    (issue 17: on a keystroke they cost more of the server process's time than the endpoint
    itself, and that process shares two cores with the model processes).

    It sits inside the app's own middleware (the API-key and body guard, the response
    headers and metrics run as for any route) and answers only what the route would answer
    the same way: a JSON body that parses and validates as :class:`TabBody`, with the
    registry's specialist (not a test's dependency override). Anything else — a body that
    does not parse or validate, another content type, another path — goes on to FastAPI
    with its body intact, so every error reads as it always did; an error raised while
    answering is rendered by the app's exception handlers, as the route's would be."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/tab" or scope["method"] != "POST" \
                or not _json_body(scope) or uses("tab") in scope["app"].dependency_overrides:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            raw = await request.body()
        except Exception as exc:  # the guard's limits, a client gone: as the route's error
            await _render(scope, request, exc, send)
            return
        try:
            body = TabBody.model_validate(orjson.loads(raw)) if raw else None
        except (ValueError, RecursionError):  # not JSON, or not a TabBody (ValidationError)
            body = None
        if body is None:  # FastAPI reads the same bytes and says what is wrong
            await self.app(scope, _replay(raw, receive), send)
            return
        try:
            spec = specialist_for(request, "tab")
            request.state.complement_model = f"{type(spec).__name__}@{spec.version}"
            response = await _answer(body, scope["app"].state, spec)
        except Exception as exc:
            await _render(scope, request, exc, send)
            return
        await response(scope, receive, send)


def _json_body(scope: Any) -> bool:
    """A body FastAPI reads as JSON: ``Content-Type: application/json`` (any parameters)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


def _replay(raw: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``raw`` as the whole body once, then waits as ``receive`` does."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()  # type: ignore[no-any-return]
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return replay


async def _render(scope: Any, request: Request, exc: Exception, send: Any) -> None:
    """``exc`` through the app's exception handlers (by class, most specific first), as
    Starlette's exception middleware would; an exception none handles is raised again."""
    handlers = scope["app"].exception_handlers
    handler = next((handlers[k] for k in type(exc).__mro__ if k in handlers), None)
    if handler is None:
        raise exc
    if asyncio.iscoroutinefunction(handler):
        response = await handler(request, exc)
    else:
        response = await run_in_threadpool(handler, request, exc)
    await response(scope, request.receive, send)


async def answer_async(spec: Any, payload: dict[str, Any]) -> Any:
    """``spec``'s Result for ``payload`` without blocking the event loop: awaited when it
    answers asynchronously (``answer_async``), through its model worker when it has one
    (``submit``), else its ``answer`` in the thread pool."""
    can = capabilities(spec)
    if AnswersAsync in can:  # a specialist in another process (--engine ray): awaited
        return await spec.answer_async(payload)
    if Batched not in can:
        return await run_in_threadpool(spec.answer, payload)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    spec.submit(payload, lambda result: loop.call_soon_threadsafe(_settle, future, result))
    return await future


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if future.done():  # the client went away and the request was cancelled
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


def tab_response(result: Any) -> dict[str, Any]:
    """The ``/v1/tab`` answer for a Tab specialist's result (the LSP server's too)."""
    meta = result.meta
    return {
        "request_id": meta.get("request_id"),
        "policy_version": meta.get("policy_version"),
        "latency_ms": meta.get("latency_ms"),
        "suggestion": result.output,
        "reason": result.reason,
        "cancelled": bool(meta.get("cancelled", False)),
        "confidence": result.confidence,
        "logprob": meta.get("logprob"),
        **({"explain": meta["explain"]} if "explain" in meta else {}),
    }


async def _log_async(state: Any, result: Any) -> None:
    """The Tab service's ``log_action`` without blocking the event loop: through the app's
    group-commit writer when it has one (the row is committed before this returns), else in
    the pool."""
    events, writer = getattr(state, "events", None), getattr(state, "tab_writer", None)
    record = action_record(result) if events is not None else None
    if record is None:
        return
    if writer is None:
        await run_in_threadpool(log_action, events, result)
        return
    loop = asyncio.get_running_loop()
    committed: asyncio.Future[Any] = loop.create_future()
    writer.write(record, lambda error: loop.call_soon_threadsafe(_settle, committed, error))
    await committed  # raises what the store raised (a reused request_id: 409)
    result.meta.pop("features")


class DeployBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: json_int(ge=0)  # type: ignore[valid-type]
    event: str = Field("deploy", pattern="^(deploy|rollback)$")


def _service(request: Request) -> TabService:
    """The app's Tab service (``router.service.tab``), which deploys, canaries and rolls
    back; a 503 when this app has none (it serves ``/v1/tab`` alone)."""
    service = getattr(request.app.state, "tab_service", None)
    if service is None:
        from router.errors import Unavailable

        raise Unavailable("this server has no Tab service (no data directory): it cannot "
                          "deploy a policy; run `complement serve`")
    return service  # type: ignore[no-any-return]


@router.post("/v1/tab/deploy")
async def deploy(body: DeployBody, request: Request,
                 spec: Specialist = Depends(uses("tab"))) -> dict[str, Any]:
    """Hot-swap a policy version. It is loaded completely, then swapped in under the Tab
    specialist's model lock: requests in flight finish on the old version, none sees a
    half-loaded one, and nothing restarts. Every deploy is logged in the event store."""
    return await _service(request).deploy(body.version, body.event)


class CanaryBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: json_int(ge=0)  # type: ignore[valid-type]
    share: float = Field(gt=0.0, lt=1.0, description="Share of editors (sessions) served it.")


@router.post("/v1/tab/canary")
async def canary(body: CanaryBody, request: Request,
                 spec: Specialist = Depends(uses("tab"))) -> dict[str, Any]:
    """Serve ``version`` to ``share`` of the editors beside the deployed version (replacing
    any canary), each editor by a hash of its ``session`` (else of each request's id). The
    policy store records it, so ``--workers N`` follow it and a restart resumes it."""
    return await _service(request).start_canary(body.version, body.share)


@router.post("/v1/tab/canary/promote")
async def promote(request: Request, spec: Specialist = Depends(uses("tab"))) -> dict[str, Any]:
    """Deploy the canary's version to everyone (the canary ends)."""
    return await _service(request).promote()


@router.post("/v1/tab/canary/abort")
async def abort(request: Request, spec: Specialist = Depends(uses("tab"))) -> dict[str, Any]:
    """End the canary: everyone is served the deployed version again. Idempotent."""
    return await _service(request).abort()


@router.get("/v1/tab/versions")
async def versions(request: Request) -> dict[str, Any]:
    """Every policy version with its lineage, the deployed one, and the last deploys."""
    return _service(request).versions()


def create_app(specialist: Any) -> Any:
    """A FastAPI app serving only ``/v1/tab`` with ``specialist`` (already set up)."""
    from fastapi import FastAPI

    from router.errors import install_handlers
    from router.registry import Registry

    app = FastAPI(title="complement tab")
    app.state.registry = Registry({"tab": specialist})
    app.include_router(router)
    install_handlers(app)
    app.add_middleware(TabFastLane)
    return app
