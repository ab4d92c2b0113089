"""One exception hierarchy for the whole service, mapped to HTTP codes in one handler.

    ComplementError                      500 internal_error
    ├── ConfigError                      (CLI exit 2; never reaches HTTP)
    ├── BadRequest                       400 invalid_request_error
    │   ├── PayloadTooLarge              413 invalid_request_error
    │   ├── RequestTimeout               408 invalid_request_error
    │   └── UnsupportedMediaType         415 invalid_request_error
    ├── ClientClosedRequest              499 client_closed_request (nobody reads it)
    ├── Unauthorized                     401 authentication_error
    ├── Forbidden                        403 permission_error
    ├── NotFound                         404 not_found_error
    │   └── UnknownRoute                 404 model_not_found
    ├── Conflict                         409 conflict_error
    ├── Unavailable                      503 service_unavailable (Retry-After: loading)
    │   └── FrontierNotConfigured        503 (names the variable or key to set)
    ├── BudgetExceeded                   402 budget_exceeded (a route's, or a key's)
    ├── RateLimited                      429 rate_limit_error (a key's rpm/tpm; Retry-After)
    └── FrontierError                    502 upstream_error
        ├── FrontierRateLimited          429 rate_limit_error
        ├── FrontierTimeout              504 timeout_error
        └── CircuitOpen                  503 circuit_open

A status says whose fault it is: 4xx for what the caller must change (a missing step, such
as retrieving before anything is indexed, is a 409 naming the step), 5xx only for the
server's own failure or a frontier's; a 503 says when to come back (``Retry-After``).

Upstream (litellm) errors are translated once, in ``router.frontier``; every class here
carries the HTTP status and OpenAI error ``type`` so the app needs a single handler.

Specialists raise their own types (``specialists.base``), which know nothing of HTTP;
``SPECIALIST_ERRORS`` is the one table that maps each to one of the classes above, and
``install_handlers`` registers the handlers every app of ours uses.
"""

from __future__ import annotations

import difflib
import logging
import typing
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from specialists.base import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    OptionsError,
    SpecialistError,
    UnavailableError,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "SPECIALIST_ERRORS",
    "BadRequest",
    "BudgetExceeded",
    "CircuitOpen",
    "ClientClosedRequest",
    "ComplementError",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "FrontierError",
    "FrontierNotConfigured",
    "FrontierRateLimited",
    "FrontierTimeout",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RequestTimeout",
    "Unauthorized",
    "Unavailable",
    "UnknownRoute",
    "UnsupportedMediaType",
    "from_specialist",
    "install_handlers",
]

log = logging.getLogger(__name__)


class ComplementError(Exception):
    status_code = 500
    error_type = "internal_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.extra = extra or {}

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
        body: dict[str, Any] = {"message": self.message, "type": self.error_type,
                                "param": self.param, "code": self.code}
        body.update(self.extra)
        return {"error": body}


class ConfigError(ComplementError):
    error_type = "config_error"


class BadRequest(ComplementError):
    status_code = 400
    error_type = "invalid_request_error"


class PayloadTooLarge(BadRequest):
    status_code = 413
    code = "payload_too_large"


class RequestTimeout(BadRequest):
    status_code = 408
    code = "request_timeout"


class UnsupportedMediaType(BadRequest):
    """A state-changing request without ``Content-Type: application/json`` (a browser's
    cross-site form or ``text/plain`` fetch is one: issue 41, F7)."""

    status_code = 415
    code = "unsupported_media_type"


class ClientClosedRequest(ComplementError):
    """The client hung up before its request was whole (nginx's 499): its doing, not ours,
    so neither a 400 nor a logged 500."""

    status_code = 499
    error_type = "client_closed_request"


class Unauthorized(ComplementError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ComplementError):
    status_code = 403
    error_type = "permission_error"


class NotFound(ComplementError):
    status_code = 404
    error_type = "not_found_error"


class UnknownRoute(NotFound):
    code = "model_not_found"
    error_type = "invalid_request_error"


class Conflict(ComplementError):
    status_code = 409
    error_type = "conflict_error"


class Unavailable(ComplementError):
    """Not ready yet (still loading, starting): come back in ``retry_after_s``."""

    status_code = 503
    error_type = "service_unavailable"
    retry_after_s: int | None = 5


class FrontierNotConfigured(Unavailable):
    code = "frontier_not_configured"
    retry_after_s = None  # no wait helps: an operator must set the key


class BudgetExceeded(ComplementError):
    status_code = 402
    error_type = "budget_exceeded"


class RateLimited(ComplementError):
    """A virtual key over its requests or tokens per minute (``router.keys``): come back
    in ``retry_after_s``."""

    status_code = 429
    error_type = "rate_limit_error"
    retry_after_s: int | None = 60


class FrontierError(ComplementError):
    status_code = 502
    error_type = "upstream_error"


class FrontierRateLimited(FrontierError):
    status_code = 429
    error_type = "rate_limit_error"


class FrontierTimeout(FrontierError):
    status_code = 504
    error_type = "timeout_error"


class CircuitOpen(FrontierError):
    status_code = 503
    error_type = "circuit_open"


#: Specialist error type → the HTTP-facing class it stands for. Looked up along the
#: exception's MRO, so a subclass a specialist defines maps like its parent.
SPECIALIST_ERRORS: dict[type[SpecialistError], type[ComplementError]] = {
    NotFoundError: NotFound,
    ForbiddenError: Forbidden,
    ConflictError: Conflict,
    UnavailableError: Unavailable,
    OptionsError: ConfigError,
    SpecialistError: BadRequest,
}


def from_specialist(exc: SpecialistError) -> ComplementError:
    """The HTTP-facing error for a specialist's (``SPECIALIST_ERRORS``)."""
    klass = next(SPECIALIST_ERRORS[k] for k in type(exc).__mro__ if k in SPECIALIST_ERRORS)
    if klass is ConfigError:  # an options error at request time is the server's fault
        error: ComplementError = Unavailable(f"specialist misconfigured: {exc.message}")
    else:
        error = klass(exc.message, param=exc.param)
    error.__cause__ = exc
    return error


def install_handlers(app: "FastAPI") -> None:
    """The app's error handlers: every error leaves in OpenAI's shape with its status."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import ClientDisconnect

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        return error_response(_CLIENT_GONE)

    @app.exception_handler(ComplementError)
    async def _ours(request: Request, exc: ComplementError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(SpecialistError)
    async def _specialist(request: Request, exc: SpecialistError) -> JSONResponse:
        return error_response(from_specialist(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors()) or [{"loc": (), "msg": "invalid request"}]
        if errors[0].get("type") == "json_invalid":
            return error_response(decode_error(errors[0], getattr(exc, "body", None)))
        route = request.scope.get("route")
        body_field = getattr(route, "body_field", None)
        model = getattr(getattr(body_field, "field_info", None), "annotation", None)
        # FastAPI names where each problem is ("body", then the field's path)
        for err in errors:
            loc = tuple(err.get("loc", ()))
            err["loc"] = loc[1:] if loc[:1] == ("body",) else loc
        return error_response(invalid_body(errors, model))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, ComplementError):
            # raised while FastAPI read the body (the guard's 413 or 408), which FastAPI
            # reports as "There was an error parsing the body" (400); say what it was
            return error_response(exc.__cause__)
        if isinstance(exc.__cause__, ClientDisconnect):
            return error_response(_CLIENT_GONE)
        error = ComplementError(str(exc.detail))
        error.status_code = exc.status_code
        error.error_type = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        if exc.status_code == 405 and exc.headers and "Allow" in exc.headers:
            error.message = (f"{request.method} is not allowed on {request.url.path}; "
                             f"it answers {exc.headers['Allow']}")
        return error_response(error, headers=exc.headers)  # a 405's Allow among them

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return error_response(ComplementError(
            f"internal error ({type(exc).__name__}); the server logged the details"))


_CLIENT_GONE = ClientClosedRequest("the client closed the connection before its request "
                                   "was whole")


MAX_PROBLEMS_SHOWN = 10


def invalid_body(errors: Sequence[Mapping[str, Any]], model: Any = None,
                 also_known: Sequence[str] = ()) -> BadRequest:
    """One 400 for a body that does not validate, the same on every endpoint (issue 40):
    every problem listed (up to :data:`MAX_PROBLEMS_SHOWN`), each as ``where: what``; an
    unknown field named with the nearest known one (``model``'s fields at that place, a
    pydantic model or None) or, when none is near, the known ones; ``param`` the first
    problem's place, ``body`` for the body as a whole. ``also_known``: more names a
    top-level field may have (chat's model parameters)."""
    problems: list[str] = []
    first_param = None
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        param = ".".join(loc) or "body"
        first_param = first_param or param
        kind = err.get("type")
        if kind == "extra_forbidden":
            known = sorted(set(field_names_at(model, loc[:-1]))
                           | (set(also_known) if len(loc) == 1 else set()))
            near = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6) if loc else []
            hint = (f"did you mean {near[0]!r}?" if near
                    else f"known fields: {', '.join(known)}" if known else "")
            problems.append(f"{param}: unknown field; remove it{' (' + hint + ')' if hint else ''}")
        elif kind in ("dict_type", "model_type", "model_attributes_type") and not loc:
            problems.append("body: send a JSON object (e.g. {\"key\": \"value\"}), "
                            f"not {type(err.get('input')).__name__}")
        else:
            problems.append(f"{param}: {err.get('msg', 'invalid')}")
    shown = problems[:MAX_PROBLEMS_SHOWN]
    if len(problems) > len(shown):
        shown.append(f"and {len(problems) - len(shown)} more")
    message = shown[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(shown)
    return BadRequest(message, param=first_param or "body")


def field_names_at(model: Any, path: Sequence[Any]) -> list[str]:
    """The field names a pydantic ``model`` allows at ``path`` inside it, for an unknown
    field's nearest name: the request bodies' (``invalid_body``) and the config's
    (``router.config``). A path steps through a model's field, a dict's value under any key
    (a name under ``models:``), a list's item under an index, and a union's member that
    pydantic names in the path (``recent_edits.0.TabEdit``); ``[]`` where it leads nowhere."""
    places = [model]
    for part in path:
        places = [nxt for place in places for nxt in _step(place, part)]
    from pydantic import BaseModel

    return sorted({name for place in places for leaf in _leaves(place)
                   if isinstance(leaf, type) and issubclass(leaf, BaseModel)
                   for name, info in leaf.model_fields.items() if not info.exclude})


def _leaves(annotation: Any) -> list[Any]:
    """A union's (``Optional``'s, ``Annotated``'s) members, unwrapped; anything else as it is."""
    import types

    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [leaf for arg in typing.get_args(annotation) for leaf in _leaves(arg)]
    if origin is typing.Annotated:
        return _leaves(typing.get_args(annotation)[0])
    return [annotation]


def _step(annotation: Any, part: Any) -> list[Any]:
    """Where ``part`` of a path leads from ``annotation``."""
    from pydantic import BaseModel

    out = []
    for leaf in _leaves(annotation):
        origin = typing.get_origin(leaf)
        if isinstance(leaf, type) and issubclass(leaf, BaseModel):
            if leaf.__name__ == part:  # pydantic names the union member it tried
                out.append(leaf)
            elif part in leaf.model_fields:
                out.append(leaf.model_fields[part].annotation)
        elif origin is dict and isinstance(part, str):
            out.append(typing.get_args(leaf)[1])
        elif origin in (list, tuple) and str(part).isdigit():
            out.append(typing.get_args(leaf)[0])
    return out


def decode_error(err: dict[str, Any], body: Any) -> BadRequest:
    """Malformed JSON, said the way ``json`` says it: what, line, column (no field is at
    fault, so ``param`` is ``body``)."""
    loc = list(err.get("loc", ()))
    pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    what = (err.get("ctx") or {}).get("error") or "JSON decode error"
    return BadRequest(f"the request body is not valid JSON: {what}: line {line} column "
                      f"{column} (char {pos})", param="body")


def error_response(exc: ComplementError, headers: Mapping[str, str] | None = None) -> Any:
    """``exc`` as a JSON response in OpenAI's error shape, with ``headers``. A 408 or 413
    closes the connection: the rest of that request's body is not going to be read; a 503
    or a key's 429 says when to retry."""
    from fastapi.responses import JSONResponse

    out = dict(headers or {})
    if exc.status_code == 401:
        out["WWW-Authenticate"] = "Bearer"
    if exc.status_code in (408, 413):
        out["Connection"] = "close"
    retry_after = getattr(exc, "retry_after_s", None)
    if exc.status_code in (429, 503) and retry_after is not None:
        out["Retry-After"] = str(retry_after)
    return JSONResponse(exc.to_openai(), status_code=exc.status_code, headers=out or None)
