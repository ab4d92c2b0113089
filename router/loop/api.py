"""``POST /v1/tab/deploy``, ``GET /v1/tab/versions``: the loop's hot swap and its record.

A deploy loads the version from the policy store completely, then swaps it in under the
Tab specialist's model lock: requests in flight finish on the old version, none sees a
half-loaded one, and nothing restarts. Every deploy is logged in the event store.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from router.loop.versions import PolicyStore
from router.registry import specialist_for

__all__ = ["router"]

router = APIRouter(tags=["loop"])


class DeployBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(ge=0)
    event: str = Field("deploy", pattern="^(deploy|rollback)$")


def _store(request: Request) -> PolicyStore:
    return PolicyStore(request.app.state.config.data_path() / "tab")


@router.post("/v1/tab/deploy")
async def deploy(body: DeployBody, request: Request) -> dict[str, Any]:
    from specialists.tab.policy import TabPolicy

    store = _store(request)
    store.lineage(body.version)  # 404 naming the known versions if it does not exist
    spec: Any = specialist_for(request, "tab")  # a TabSpecialist: it has swap()
    policy = await run_in_threadpool(TabPolicy.load, store.path(body.version))
    previous = await run_in_threadpool(spec.swap, policy)
    store.set_deployed(body.version)
    events = getattr(request.app.state, "events", None)
    if events is not None:
        await run_in_threadpool(events.record_deploy, str(body.version), body.event,
                                previous=previous)
    return {"deployed": body.version, "previous": previous, "event": body.event}


@router.get("/v1/tab/versions")
async def versions(request: Request) -> dict[str, Any]:
    store = _store(request)
    events = getattr(request.app.state, "events", None)
    return {"deployed": store.deployed(), "versions": store.versions(),
            "deploys": events.deploy_log(20) if events is not None else []}
