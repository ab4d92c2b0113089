"""``POST /v1/edit``: the edit cascade over HTTP (see ``router.edit``).

The request names a route of the config (its model targets answer, in order, as
fallbacks), the instruction, and either a repository under ``workspace.allowed_roots``
(``repo`` + optional ``files``) or inline ``texts``. The response is the unified diff, the
merged files and the trace of every step. Nothing is written unless ``write`` is true.

An edit changes only the files the request gives it: those named in ``files`` or
``texts`` (with neither, the ones retrieval chose). A file named in ``files`` that does not
exist yet is a new file the request allows; no other new file is. A model's answer naming
any other path (another file, ``../``, an absolute path, ``.git/...``) is refused as a
whole with a 403 naming the path, and nothing is written. With ``write``, nothing under a
dot-folder (``.git/``, ``.github/``, ...), no ``.git`` file and no path through a symlink is
ever written; the files are written all at once or not at all.

A request cannot name a command: verification commands come from the config
(``workspace.verify``, per route or per repository) and run in a scratch copy without
symlinks, inside a sandbox (bubblewrap: read-only file system but the copy, no network, a
clean environment, memory and time limits; ``router.edit.sandbox``). Without bubblewrap,
verification fails closed unless the config says ``sandbox: none``. The applier and the
retriever are the registry's, so swapping either in YAML changes this path too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from router.api.apply import check_request_size
from router.api.jsonbody import FILE_PATH, NOT_BLANK, PATH, JSONRoute
from router.errors import BadRequest, UnknownRoute
from router.registry import uses
from specialists.base import Specialist
from specialists.paths import resolve_repo

__all__ = ["EditBody", "router"]

router = APIRouter(tags=["edit"], route_class=JSONRoute)


FilePath = Annotated[str, Field(pattern=FILE_PATH)]
#: ``write`` needs ``repo``: in the schema as in validation.
_WRITE_NEEDS_REPO = {"anyOf": [
    {"properties": {"write": {"const": False}}},
    {"required": ["repo"], "properties": {"repo": {"type": "string", "minLength": 1}}},
]}


class EditBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_WRITE_NEEDS_REPO)

    instruction: str = Field(min_length=1, max_length=100_000, pattern=NOT_BLANK,
                             description="What to change; not only blanks.")
    route: str = "auto"
    """A route under ``routes:``; its model targets are tried in order."""
    repo: str | None = Field(None, min_length=1, pattern=PATH,
                             description="a repository under workspace.allowed_roots")
    files: list[FilePath] = Field(
        default_factory=list, max_length=100,
        description="paths relative to repo the model may edit, and the only ones it may: "
                    "one that does not exist yet is a new file the request allows; an answer "
                    "naming any other path is refused as a whole (403). With write, no path "
                    "under a dot-folder (.git/, .github/, ...) is accepted")
    texts: dict[FilePath, str] = Field(default_factory=dict,
                                       description="inline file contents by relative path",
                                       json_schema_extra={"additionalProperties": False})
    strategy: Literal["cascade", "sketch", "search_replace", "whole_file"] = "cascade"
    write: bool = Field(False, description="write the merged files into repo, all or none "
                                           "(only the request's files, never through a "
                                           "symlink or under a dot-folder)")
    replay_task: str | None = None


def pipeline_for(app_state: Any, route: str, repo: Path | None, applier: Specialist) -> Any:
    """The edit pipeline for one configured route (model targets only) and repository."""
    from router.edit import EditPipeline, verifiers_for

    config = app_state.config
    if route not in config.routes:
        raise UnknownRoute(f"route {route!r} is not configured (known: "
                           f"{sorted(config.routes)})", param="route")
    frontier = app_state.frontier
    targets = [t for t in config.routes[route].targets if t in frontier.models]
    if not targets:
        raise BadRequest(f"route {route!r} has no frontier model target", param="route")
    missing = [(t, frontier.missing_key(t)) for t in targets]
    if all(why is not None for _, why in missing):  # as chat answers: 503 naming what to set
        from router.frontier import not_configured

        raise not_configured(route, [f"{t}: {why}" for t, why in missing])
    if any(frontier.models[t].model.startswith("replay/") for t in targets):
        _install_replay(app_state)
    return EditPipeline(frontier, targets, route=route, applier=applier,
                        retriever=app_state.registry.find("retrieval"),
                        verifiers=verifiers_for(config.workspace.verify, route, repo),
                        allowed_roots=config.workspace.roots())


#: Frontier calls one edit may make per target (a sketch, then its retries and fallbacks).
EDIT_CALLS_PER_TARGET = 3
EDIT_OUTPUT_TOKENS = 8192


async def _reserve(request: Request, body: EditBody) -> None:
    """A virtual key's check of the route, and its budget's hold on the edit's worst case."""
    from router.keys import charge_of
    from router.routing import estimate_usd

    charge = charge_of(request)
    if charge is None:
        return
    charge.allow_route(body.route)
    state = request.app.state
    prompt = [{"content": body.instruction}, *({"content": t} for t in body.texts.values())]
    worst = sum(estimate_usd(state.frontier, target, prompt,
                             {"max_tokens": EDIT_OUTPUT_TOKENS}) or 0.0
                for target in state.config.routes[body.route].targets)
    await charge.reserve(worst * EDIT_CALLS_PER_TARGET,
                         state.config.routes[body.route].budget.latency_s or 600.0)


def _install_replay(app_state: Any) -> None:
    from router.replay import ReplayStore, install

    if getattr(app_state, "replay_store", None) is None:
        app_state.replay_store = ReplayStore()
        install(app_state.replay_store)


@router.post("/v1/edit")
async def edit(body: EditBody, request: Request,
               applier: Specialist = Depends(uses("apply"))) -> dict[str, Any]:
    """Edit files from an instruction; ``status`` is ``applied`` or ``failed`` (with why).

    The edit may change only the request's files (a file named in ``files`` that does not
    exist yet is a new file it allows); a model's answer naming any other path is refused
    with a 403 naming it, and nothing is written. ``write`` never writes under a dot-folder
    (``.git/``, ``.github/``) or through a symlink. Verification commands (from the config
    only) run sandboxed in a scratch copy; without the sandbox tool they fail closed."""
    from router.edit import EditRequest

    check_request_size(request.app.state.config.server, "POST /v1/edit",
                       len(set(body.files) | set(body.texts)), list(body.texts.values()))
    if body.write and not body.repo:
        raise BadRequest("write needs repo: the directory the files are written into",
                         param="write")
    config = request.app.state.config
    repo = resolve_repo(body.repo, config.workspace.roots()) if body.repo else None
    pipeline = pipeline_for(request.app.state, body.route, repo, applier)
    await _reserve(request, body)
    # only a configured route: the name goes into a header and a metrics label
    request.state.complement_route = body.route
    req = EditRequest(instruction=body.instruction, repo=str(repo) if repo else None,
                      files=body.files, texts=body.texts, strategy=body.strategy,
                      write=body.write, replay_task=body.replay_task)
    result = await pipeline.run(req)
    request.state.complement_route = body.route
    request.state.complement_model = result.model or "none"
    request.state.complement_cost_usd = result.cost_usd
    return {"object": "edit", **result.to_dict()}
