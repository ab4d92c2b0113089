"""``POST /v1/apply``: one or several files, each merged or abstained, plus one patch.

Mounted by the app (``app.include_router(specialists.apply.api.router)``). The applier comes
from the running server's registry (the specialist of kind ``"apply"``) through the
``get_applier`` dependency, which tests override.
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from specialists.apply.specialist import ApplySpecialist
from specialists.base import Specialist, SpecialistError

__all__ = ["ApplyFile", "ApplyRequest", "get_applier", "router"]

router = APIRouter(tags=["apply"])


class ApplyFile(BaseModel):
    original: str = Field(description="The file as it is now.")
    sketch: str = Field(description="The lazy edit sketch, with '... existing code ...' markers.")
    path: Optional[str] = Field(default=None, description="Path: names the diff, picks the language.")
    language: Optional[str] = None


class ApplyRequest(BaseModel):
    original: Optional[str] = None
    sketch: Optional[str] = None
    path: Optional[str] = None
    language: Optional[str] = None
    files: Optional[list[ApplyFile]] = None


def get_applier(request: Request) -> Specialist:
    """The configured apply specialist; a default one when the app has no registry."""
    registry = getattr(request.app.state, "registry", None)
    if registry is not None:
        from router.registry import specialist_for

        return specialist_for(request, "apply")
    applier = getattr(request.app.state, "default_applier", None)
    if applier is None:
        applier = request.app.state.default_applier = ApplySpecialist()
    return applier


@router.post("/v1/apply")
def apply_endpoint(body: ApplyRequest, applier: Specialist = Depends(get_applier)) -> dict[str, Any]:
    """Merge each sketch; ``status`` is ``applied`` only when every file applied."""
    if body.files is not None:
        payload: dict[str, Any] = {"files": [f.model_dump() for f in body.files]}
    else:
        payload = body.model_dump(exclude={"files"})
    try:
        result = applier.answer(payload)
    except SpecialistError as exc:
        from router.errors import BadRequest

        raise BadRequest(str(exc), param="files" if body.files is not None else "sketch") from exc
    output = result.output or {}
    return {
        "object": "apply.result",
        "status": "abstained" if result.abstained else "applied",
        "reason": result.reason,
        "confidence": result.confidence,
        "files": output.get("files", []),
        "diff": output.get("diff", ""),
    }
