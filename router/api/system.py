"""``/v1/models``, ``/healthz``, ``/readyz``, ``/metrics``."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

__all__ = ["router"]

router = APIRouter()
_CREATED = int(time.time())


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    """Routes are the models clients ask for; each says whether it can answer now."""
    state = request.app.state
    data = []
    for name, route in state.config.routes.items():
        reasons = state.router.live_reasons(name)
        data.append({"id": name, "object": "model", "created": _CREATED,
                     "owned_by": "complement", "policy": route.policy,
                     "targets": route.targets, "live": not reasons,
                     "why_not": reasons or None, "description": route.description})
    return {"object": "list", "data": data}


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def readiness(registry: Any) -> tuple[str, dict[str, Any]]:
    """``ready`` when every specialist can answer now; ``loading`` while any still loads
    (its health says how far); ``not ready`` when one failed. Shared with ``doctor``."""
    specialists: dict[str, Any] = {}
    for name, spec in registry:
        if name in registry.errors:
            specialists[name] = {"ok": False, "error": registry.errors[name]}
        else:
            specialists[name] = spec.health()
    if not all(s.get("ok", False) for s in specialists.values()):
        return "not ready", specialists
    if any(s.get("loading") for s in specialists.values()):
        return "loading", specialists
    return "ready", specialists


@router.get("/readyz", response_model=None)
async def readyz(request: Request) -> Response:
    """200 only when every configured specialist answers; 503 while any loads or failed.

    It needs no API key (a load balancer asks it), so without a valid key it says only
    the status: each specialist's health names files on the server (checkpoints, indexes)
    and its workers. With a valid key, or on a server without keys (loopback only, its
    ``Host`` checked: ``router.app.GuardMiddleware``), every specialist's health too."""
    registry = getattr(request.app.state, "registry", None)
    detail = bool(getattr(request.state, "complement_authorised", False))
    if registry is None:
        status, specialists = "loading", {}
    else:
        status, specialists = readiness(registry)
    body: dict[str, Any] = {"status": status}
    if detail:
        body["specialists"] = specialists
    return JSONResponse(body, status_code=200 if status == "ready" else 503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    body, content_type = request.app.state.metrics.render()
    return Response(body, media_type=content_type)
