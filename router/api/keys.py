"""Virtual keys, managed by the admin key (issue 37), under the names LiteLLM's proxy users
know: ``POST /key/generate``, ``GET /key/info``, ``POST /key/update``, ``POST /key/delete``
and ``GET /key/list``.

A key is named in a request by itself (``sk-cmp-...``) or by its ``token`` (the SHA-256
that ``/key/generate`` and ``/key/info`` return, safe to keep in scripts and logs). The key
itself is shown once, by ``/key/generate``; the server keeps only its hash. ``/key/delete``
revokes: the key is refused from then on, its record and spend stay. What the keys may do
and how they are enforced: ``router.keys``.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from router.api.jsonbody import JSONRoute, json_int
from router.errors import BadRequest, Conflict
from router.keys import (
    AREAS,
    KEY_PREFIX,
    KeyGate,
    KeyStore,
    hash_key,
    parse_duration,
    unknown_key,
)

__all__ = ["DeleteBody", "GenerateBody", "UpdateBody", "key_fields", "router", "token_of"]

router = APIRouter(tags=["keys"], route_class=JSONRoute)

#: The areas a key may be limited to: the built-in ones (``system`` is always allowed), and
#: those a config's ``endpoints:`` adds, which ``key_fields`` checks (and the schema lists).
BUILT_IN_AREAS = [area for area in AREAS if area != "system"]
Area = Annotated[str, Field(json_schema_extra={"enum": BUILT_IN_AREAS})]
_TOKEN = re.compile(r"^[0-9a-f]{64}$")
#: A key or its token, and a duration, as the schema says; validated by hand (``token_of``,
#: ``router.keys.parse_duration``) so a mistake's 400 says what to write.
KEY_OR_TOKEN = r"^(sk-cmp-[A-Za-z0-9_-]+|[0-9a-f]{64})$"
DURATION = r"^[1-9][0-9]{0,8}[smhd]$"


class _Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    key_name: str | None = Field(None, max_length=200, description="A name for people.")
    max_budget: float | None = Field(None, ge=0, description="USD the key may spend in all; "
                                     "null: no limit.")
    rpm_limit: json_int(ge=1, le=2**53 - 1) | None = Field(  # type: ignore[valid-type]
        None, description="Requests per minute (Tab's too).")
    tpm_limit: json_int(ge=1, le=2**53 - 1) | None = Field(  # type: ignore[valid-type]
        None, description="Tokens per minute (chat's usage).")
    allowed_routes: list[Area] | None = Field(
        None, description="The API areas the key may use (null: all but the admin ones).")
    models: list[str] | None = Field(
        None, description="The routes (chat's 'model', edit's 'route') it may use; null: all.")
    metadata: dict[str, Any] | None = Field(None, description="Anything, kept with the key.")
    duration: str | None = Field(None, json_schema_extra={"pattern": DURATION},
                                 description="Valid for this long from now: '30s', '15m', "
                                             "'12h', '30d'; null: no expiry.")


class GenerateBody(_Limits):
    pass


class UpdateBody(_Limits):
    key: str = Field(json_schema_extra={"pattern": KEY_OR_TOKEN},
                     description="The key, or its token.")
    spend: float | None = Field(None, ge=0, description="Set the spend (a reset: 0).")


class DeleteBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    keys: list[Annotated[str, Field(json_schema_extra={"pattern": KEY_OR_TOKEN})]] = Field(
        min_length=1, max_length=1000, description="Keys or tokens to revoke, all or none.")


def _gate(request: Request) -> tuple[KeyGate, KeyStore]:
    gate: KeyGate = request.app.state.keys
    if not gate.admin_keys or gate.store is None:
        raise Conflict("this server has no admin key, so it checks no virtual keys: set "
                       "COMPLEMENT_ADMIN_KEY (or server.admin_keys), restart, and manage keys "
                       "with it")
    return gate, gate.store


def token_of(value: str, param: str = "key") -> str:
    if value.startswith(KEY_PREFIX) and re.match(KEY_OR_TOKEN, value):
        return hash_key(value)
    if _TOKEN.match(value):
        return value
    raise BadRequest(f"{param}: {value[:12]!r}... is neither a key (sk-cmp-...) nor a token "
                     "(64 hex digits, as /key/generate and /key/info return)", param=param)


def key_fields(body: _Limits, routes: Any, areas: Any = ()) -> dict[str, Any]:
    """The ``KeyStore`` fields the body set (an explicit null clears a limit); ``routes``:
    the server's, which ``models`` must name; ``areas``: those its config's ``endpoints:``
    adds to the built-in ones, which ``allowed_routes`` must name."""
    given = body.model_fields_set - {"key", "duration"}
    fields = {name: getattr(body, name) for name in given}
    known = BUILT_IN_AREAS + sorted(areas)
    strange = [area for area in body.allowed_routes or [] if area not in known]
    if strange:
        raise BadRequest(f"allowed_routes: {strange} are not areas of this server (known: "
                         f"{known})", param="allowed_routes")
    unknown = sorted(set(body.models or []) - set(routes))
    if unknown:
        raise BadRequest(f"models: {unknown} are not routes of this server (known: "
                         f"{sorted(routes)})", param="models")
    if "duration" in body.model_fields_set:
        try:
            fields["expires_at"] = None if body.duration is None else \
                time.time() + parse_duration(body.duration)
        except ValueError as exc:
            raise BadRequest(str(exc), param="duration") from None
    return fields


@router.post("/key/generate")
async def generate(body: GenerateBody, request: Request) -> dict[str, Any]:
    """Issue a virtual key. Its text is in this answer only (``key``); keep it."""
    _, store = _gate(request)
    config = request.app.state.config
    fields = key_fields(body, config.routes, config.endpoints)
    key, record = await run_in_threadpool(lambda: store.create(**fields))
    return {"key": key, **record.info()}


@router.get("/key/info")
async def info(request: Request, key: str = Query(
        json_schema_extra={"pattern": KEY_OR_TOKEN},
        description="The key's token (or the key itself, which then shows in access logs)")
               ) -> dict[str, Any]:
    """A key's limits and spend (``held``: budget held by its requests in flight)."""
    _, store = _gate(request)
    token = token_of(key)
    record = await run_in_threadpool(store.get, token)
    if record is None:
        raise unknown_key(token)
    return {**record.info(), "held": await run_in_threadpool(store.held, token)}


@router.get("/key/list")
async def list_keys(request: Request) -> dict[str, Any]:
    """Every key's limits and spend, revoked ones included."""
    _, store = _gate(request)
    return {"keys": [k.info() for k in await run_in_threadpool(store.all)]}


@router.post("/key/update")
async def update(body: UpdateBody, request: Request) -> dict[str, Any]:
    """Change a key's limits, expiry (``duration`` from now), metadata or spend; applied
    to this server process at once, to others within ``server.key_cache_s``."""
    gate, store = _gate(request)
    token = token_of(body.key)
    config = request.app.state.config
    fields = key_fields(body, config.routes, config.endpoints)
    record = await run_in_threadpool(lambda: store.update(token, **fields))
    gate.forget(token)
    return record.info()


@router.post("/key/delete")
async def delete(body: DeleteBody, request: Request) -> dict[str, Any]:
    """Revoke keys: refused from now on (their records and spend stay)."""
    gate, store = _gate(request)
    tokens = [token_of(k, "keys") for k in body.keys]
    revoked = await run_in_threadpool(store.revoke, tokens)
    for token in revoked:
        gate.forget(token)
    return {"deleted_keys": revoked}
