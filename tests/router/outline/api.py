"""File 2 of 3: the endpoint, a FastAPI ``APIRouter`` named in the config's ``endpoints:``.

``uses("outline")`` gives it the registry's specialist of that kind (503 while none is
loaded); the body is validated strictly (an unknown field is a 400 naming it, as on
every endpoint, through ``JSONRoute``); the answer runs on the thread pool.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from router.api.jsonbody import JSONRoute
from router.registry import uses
from specialists.base import Specialist

router = APIRouter(tags=["outline"], route_class=JSONRoute)


class OutlineBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = Field(description="A Python module's text.")


@router.post("/v1/outline")
async def outline(body: OutlineBody, spec: Specialist = Depends(uses("outline"))
                  ) -> dict[str, Any]:
    """The module's top-level functions and classes, or why there are none to give."""
    result = await run_in_threadpool(spec.answer, body.model_dump())
    return {"names": result.output, "abstained": result.abstained, "reason": result.reason,
            "version": spec.version}
