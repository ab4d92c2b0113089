"""``POST /v1/edit``: the edit pipeline over HTTP (see ``router.pipeline``).

The request names a route of the config (its model targets answer, in order, as
fallbacks), the instruction, and either a repository on this machine (``repo`` + optional
``files``) or inline ``texts``. The response is the unified diff, the merged files and the
trace of every step. Nothing is written unless ``write`` is true.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from router.errors import BadRequest, UnknownRoute

__all__ = ["EditBody", "router"]

router = APIRouter(tags=["edit"])


class EditBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instruction: str = Field(min_length=1)
    route: str = "auto"
    """A route under ``routes:``; its model targets are tried in order."""
    repo: str | None = None
    files: list[str] = Field(default_factory=list)
    texts: dict[str, str] = Field(default_factory=dict)
    strategy: str = "cascade"
    """cascade | sketch | search_replace | whole_file"""
    verify_command: str | None = None
    verify_timeout_s: float = Field(60.0, gt=0, le=3600)
    write: bool = False
    replay_task: str | None = None


def pipeline_for(app_state: Any, route: str) -> Any:
    """The edit pipeline for one configured route (model targets only)."""
    from router.pipeline import EditPipeline

    config = app_state.config
    if route not in config.routes:
        raise UnknownRoute(f"route {route!r} is not configured (known: "
                           f"{sorted(config.routes)})", param="route")
    frontier = app_state.frontier
    targets = [t for t in config.routes[route].targets if t in frontier.models]
    if not targets:
        raise BadRequest(f"route {route!r} has no frontier model target", param="route")
    if any(frontier.models[t].model.startswith("replay/") for t in targets):
        _install_replay(app_state)
    return EditPipeline(frontier, targets, route=route,
                        index_base=config.data_path() / "indexes")


def _install_replay(app_state: Any) -> None:
    from router.replay import ReplayStore, install

    if getattr(app_state, "replay_store", None) is None:
        app_state.replay_store = ReplayStore()
        install(app_state.replay_store)


@router.post("/v1/edit")
async def edit(body: EditBody, request: Request) -> dict[str, Any]:
    from router.pipeline import EditRequest

    if body.write and not body.repo:
        raise BadRequest("write needs repo: the directory the files are written into",
                         param="write")
    pipeline = pipeline_for(request.app.state, body.route)
    req = EditRequest(instruction=body.instruction, repo=body.repo, files=body.files,
                      texts=body.texts, strategy=body.strategy,
                      verify_command=body.verify_command,
                      verify_timeout_s=body.verify_timeout_s, write=body.write,
                      replay_task=body.replay_task)
    result = await pipeline.run(req)
    return {"object": "edit", **result.to_dict()}
