"""``POST /v1/tab``: a suggestion (range + text) or an explicit nothing.

The router module is mounted by the main app (``app.include_router(tab_router)``); the
running server's specialist of kind ``tab`` answers (``router.registry.specialist_for``).
:func:`create_app` builds a standalone app around one specialist, for tests and for
serving Tab alone.

Every answer carries the request id, the policy version and the latency. Bad input is a
4xx (422 for a malformed body, 400 for a cursor outside the file) or an explicit
``suggestion: null`` with a ``reason`` (empty, binary or non-UTF-8 content, a request
made stale by a newer one from the same ``session``); never a 500.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from router.errors import BadRequest
from specialists.base import SpecialistError

__all__ = ["router", "TabBody", "TabEdit", "create_app"]

router = APIRouter(tags=["tab"])


class TabEdit(BaseModel):
    old: str = ""
    new: str = ""
    offset: int = 0


class TabBody(BaseModel):
    file: str = Field(description="The document's text; only a window around the cursor is read.")
    cursor: int = Field(description="Offset of the cursor in 'file', in characters.")
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
                                description="Editor/document id: a newer 'seq' cancels older pending requests.")
    seq: int | None = None


def _specialist(request: Request) -> Any:
    from router.registry import specialist_for

    return specialist_for(request, "tab")


@router.post("/v1/tab")
def tab(body: TabBody, request: Request) -> dict[str, Any]:
    """Answer one keystroke's request. Synchronous: FastAPI runs it in its thread pool, so a
    slow request never blocks the event loop, and the model lock serialises the CPU work."""
    spec = _specialist(request)
    payload = body.model_dump()
    payload["recent_edits"] = [e.model_dump() if isinstance(e, TabEdit) else e for e in body.recent_edits]
    try:
        result = spec.answer(payload)
    except SpecialistError as exc:
        raise BadRequest(str(exc), param=None) from exc
    meta = result.meta
    _log_action(request, result)
    return {
        "request_id": meta.get("request_id"),
        "policy_version": meta.get("policy_version"),
        "latency_ms": meta.get("latency_ms"),
        "suggestion": result.output,
        "reason": result.reason,
        "cancelled": bool(meta.get("cancelled", False)),
        "confidence": result.confidence,
        "logprob": meta.get("logprob"),
    }


def _log_action(request: Request, result: Any) -> None:
    """Record the policy's decision in the event store (when the server keeps one and the
    specialist logs features): the loop trains on exactly these events."""
    store = getattr(request.app.state, "events", None)
    meta = result.meta
    if store is None or "features" not in meta or meta.get("cancelled"):
        return
    from router.events import ActionRecord

    shown = result.output is not None
    store.record_action(ActionRecord(
        request_id=str(meta["request_id"]), policy_version=str(meta["policy_version"]),
        action=str(meta.get("action", 0)), logprob=float(meta.get("logprob", 0.0)),
        shown=shown, features=meta["features"],
        suggestion=result.output["text"] if shown else None,
        latency_ms=float(meta.get("latency_ms") or 0.0)))
    meta.pop("features")


def create_app(specialist: Any) -> Any:
    """A FastAPI app serving only ``/v1/tab`` with ``specialist`` (already set up)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from router.errors import ComplementError
    from router.registry import Registry

    app = FastAPI(title="complement tab")
    app.state.registry = Registry({"tab": specialist})
    app.include_router(router)

    @app.exception_handler(ComplementError)
    async def _error(_: Request, exc: ComplementError) -> JSONResponse:
        return JSONResponse(exc.to_openai(), status_code=exc.status_code)

    return app
