"""The browser playground and route dashboard: ``GET /`` and ``GET /v1/dashboard``.

The page (``router/static/``: plain HTML and JavaScript shipped in the package, CodeMirror
vendored as one file, no build step for users) has an editor with Tab ghost text, an apply
pane, a retrieve pane and the dashboard. Everything the dashboard draws comes from
``/v1/dashboard`` as JSON: requests, latency histograms, cost and escalations per route and
model (the same registry ``/metrics`` renders), accept/show rate and reward per Tab policy
version (the event store), the deploy log, and each virtual key's spend and limits.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response

__all__ = ["STATIC", "dashboard_data", "router"]

router = APIRouter(tags=["playground"])
STATIC = Path(__file__).resolve().parents[1] / "static"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css",
          ".svg": "image/svg+xml", ".txt": "text/plain"}


@router.get("/", include_in_schema=False)
async def index() -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    """The page's icon where browsers look for it unasked (a 404 in every console before)."""
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


@router.get("/static/{name:path}", include_in_schema=False)
async def static(name: str) -> Response:
    """The page's own files; nothing outside ``router/static`` is ever served."""
    from router.errors import NotFound

    try:
        target = (STATIC / name).resolve()
        found = STATIC in target.parents and target.is_file()
    except (OSError, ValueError):  # a NUL in the name, a name too long for the OS
        found = False
    if not found:
        raise NotFound(f"no static file {name!r}")
    return FileResponse(target, media_type=_TYPES.get(target.suffix, "application/octet-stream"))


@router.get("/v1/dashboard")
async def dashboard(request: Request) -> dict[str, Any]:
    """What the dashboard draws, as JSON."""
    from starlette.concurrency import run_in_threadpool

    principal = getattr(request.state, "complement_principal", None)
    return await run_in_threadpool(dashboard_data, request.app.state, principal)


def dashboard_data(state: Any, principal: Any = None) -> dict[str, Any]:
    """``principal`` (``router.keys``): the admin (or a server without keys) sees every
    virtual key's spend and limits, a virtual key its own, an inference key none."""
    routes = _routes(state.metrics.registry)
    events = getattr(state, "events", None)
    tab: dict[str, Any] = {"versions": [], "kinds": [], "deploys": [], "pending_feedback": 0}
    if events is not None:
        tab = {"versions": events.version_stats(), "kinds": events.kind_stats(),
               "deploys": events.deploy_log(20), "pending_feedback": events.pending()}
    registry = getattr(state, "registry", None)
    spec = registry.find("tab") if registry is not None else None
    tab["deployed"] = spec.version if spec is not None else None
    return {"routes": routes, "tab": tab, "evals": eval_reports(eval_dir()),
            "eval_dir": str(eval_dir()), "keys": _keys(state, principal)}


def _keys(state: Any, principal: Any) -> list[dict[str, Any]]:
    from router.keys import ADMIN, VirtualKey

    gate = getattr(state, "keys", None)
    if gate is None or gate.store is None or not gate.admin_keys:
        return []
    if principal == ADMIN:
        return [k.info() for k in gate.store.all()]
    if isinstance(principal, VirtualKey):
        own = gate.store.get(principal.key_hash)
        return [own.info()] if own is not None else []
    return []


def eval_dir() -> Path:
    """Where ``complement eval`` writes its runs (``--out``; default ``runs/eval``), read
    per request so a deployment or a test can point ``COMPLEMENT_EVAL_DIR`` elsewhere."""
    import os

    return Path(os.environ.get("COMPLEMENT_EVAL_DIR") or "runs/eval")


def eval_reports(directory: Path, last: int = 5) -> list[dict[str, Any]]:
    """The newest eval runs there: suite, when, and per route exact match and cost."""
    import json

    runs = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    out = []
    for path in runs[:last]:
        try:
            run = json.loads(path.read_text())
            routes = (run.get("summary") or {}).get("routes") or {}
        except (OSError, ValueError, AttributeError):
            continue
        out.append({"file": path.name, "suite": run.get("suite"), "created": run.get("created"),
                    "routes": {name: {k: row.get(k) for k in ("n", "exact", "cost_usd",
                                                              "latency_p50_s")}
                               for name, row in routes.items() if isinstance(row, dict)}})
    return out


def _routes(registry: Any) -> list[dict[str, Any]]:
    """Per (route, model): requests by status, latency histogram, cost, escalations."""
    rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "by_status": {}, "cost_usd": 0.0, "latency_buckets": [],
                 "latency_sum_s": 0.0, "escalations": 0})
    escalations: dict[str, float] = defaultdict(float)
    for family in registry.collect():
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "complement_requests_total":
                row = rows[labels["route"], labels["model"]]
                row["requests"] += int(sample.value)
                row["by_status"][labels["status"]] = int(sample.value)
            elif sample.name == "complement_request_latency_seconds_bucket":
                rows[labels["route"], labels["model"]]["latency_buckets"].append(
                    {"le": labels["le"], "count": int(sample.value)})
            elif sample.name == "complement_request_latency_seconds_sum":
                rows[labels["route"], labels["model"]]["latency_sum_s"] = float(sample.value)
            elif sample.name == "complement_cost_usd_total":
                rows[labels["route"], labels["model"]]["cost_usd"] = float(sample.value)
            elif sample.name == "complement_escalations_total":
                escalations[labels["route"]] += sample.value
    out = []
    for (route, model), row in sorted(rows.items()):
        row["escalations"] = int(escalations.get(route, 0))
        out.append({"route": route, "model": model, **row})
    return out
