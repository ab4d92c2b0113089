"""``POST /v1/feedback``: accept / reject / partial for a suggestion the Tab route showed,
and the final report on what became of it (issue 35).

Idempotent (the same feedback twice is one outcome); unknown id → 404; feedback after the
request's window → 409; a different outcome for an id that has one → 409. Batch form:
``{"feedback": [{...}, ...]}`` answers one result per item, so one bad item does not sink a
buffered batch.

The final report — ``chars_kept`` (accepted characters still present ``kept_after``
keystrokes later), ``undone`` (the accept was undone), ``switched_off`` (Tab was switched
off after it) — comes with the outcome or in a later feedback repeating it (``chars_accepted``
may be left out then). It is recorded once: the same report again is a duplicate, a
different one → 409; one that contradicts its outcome or itself (``chars_kept`` or
``undone`` on a rejected suggestion, ``chars_kept`` with ``undone``, ``kept_after`` without
``chars_kept``) → 409 too. ``chars_kept`` counts at most the
characters accepted (as ``chars_accepted`` counts at most the suggestion's).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from router.api.chat import parse_json_body, validation_error
from router.api.jsonbody import json_int
from router.errors import ComplementError, Unavailable, from_specialist
from specialists.base import LearnsOutcomes, SpecialistError, capabilities
from specialists.tab.events import EventStore, Feedback

__all__ = ["router"]

router = APIRouter()


class FeedbackItem(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    request_id: str = Field(min_length=1, max_length=200)
    outcome: Literal["accepted", "rejected", "partial"]
    chars_accepted: json_int(ge=0) | None = None  # type: ignore[valid-type]
    chars_kept: json_int(ge=0) | None = Field(  # type: ignore[valid-type]
        None, description="final report: accepted characters still present kept_after "
                          "keystrokes after the accept (counted up to chars_accepted)")
    kept_after: json_int(ge=0) | None = Field(  # type: ignore[valid-type]
        None, description="final report: the keystrokes after the accept at which "
                          "chars_kept was counted")
    undone: bool | None = Field(None, description="final report: the accept was undone")
    switched_off: bool | None = Field(
        None, description="final report: the person switched Tab off after this suggestion")


class FeedbackBatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    feedback: list[FeedbackItem] = Field(min_length=1, max_length=10_000)


def store_of(request: Request) -> EventStore:
    store = getattr(request.app.state, "events", None)
    if store is None:
        raise Unavailable("the event store is not open")
    return store


def _record(store: EventStore, item: FeedbackItem, deployed: str | None) -> dict[str, Any]:
    new = store.record_feedback(Feedback(item.request_id, item.outcome, item.chars_accepted,
                                         chars_kept=item.chars_kept, kept_after=item.kept_after,
                                         undone=item.undone, switched_off=item.switched_off))
    out: dict[str, Any] = {"request_id": item.request_id,
                           "status": "recorded" if new else "duplicate"}
    version = store.version_of(item.request_id)
    if deployed is not None and version is not None and version != deployed:
        out["note"] = (f"policy version {version} is no longer deployed (now {deployed}): "
                       "recorded for its statistics, not trained on")
    return out


def _deployed(request: Request) -> str | None:
    """The Tab policy version being served, if a Tab specialist is."""
    registry = getattr(request.app.state, "registry", None)
    spec = registry.find("tab") if registry is not None else None
    return str(spec.version) if spec is not None else None


def _record_batch(store: EventStore, items: list[FeedbackItem],
                  deployed: str | None) -> list[dict[str, Any]]:
    results = []
    for item in items:
        try:
            results.append(_record(store, item, deployed))
        except (ComplementError, SpecialistError) as exc:
            error = from_specialist(exc) if isinstance(exc, SpecialistError) else exc
            results.append({"request_id": item.request_id, "status": "error",
                            **error.to_openai(), "status_code": error.status_code})
    return results


def _tell_tab(request: Request, items: list[FeedbackItem], results: list[dict[str, Any]]) -> None:
    """New outcomes into the Tab specialist's per-session history (its personal features,
    ``specialists.tab.personal``), which remembers what it showed to whom."""
    registry = getattr(request.app.state, "registry", None)
    spec = registry.find("tab") if registry is not None else None
    if spec is None or LearnsOutcomes not in capabilities(spec):
        return
    for item, result in zip(items, results):
        if result.get("status") == "recorded":
            spec.record_outcome(item.request_id, item.outcome, item.chars_accepted)


@router.post("/v1/feedback")
async def feedback(request: Request) -> dict[str, Any]:
    store = store_of(request)
    body = await parse_json_body(request)
    try:
        if isinstance(body, dict) and "feedback" in body:
            batch = FeedbackBatch.model_validate(body)
            results = await run_in_threadpool(_record_batch, store, batch.feedback,
                                              _deployed(request))
            _tell_tab(request, batch.feedback, results)
            return {"results": results}
        item = FeedbackItem.model_validate(body)
    except ValidationError as exc:
        model = FeedbackBatch if isinstance(body, dict) and "feedback" in body else FeedbackItem
        raise validation_error(exc, model) from None
    result = await run_in_threadpool(_record, store, item, _deployed(request))
    _tell_tab(request, [item], [result])
    return result
