"""The app factory: wires config, specialists, the frontier client and the API routers.

Nothing is loaded at import. ``create_app(config)`` builds an app whose ``lifespan`` builds
the registry (loading models in each specialist's ``setup``), so tests can pass their own.
"""

from __future__ import annotations

import hmac
import importlib
import logging
import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router.config import Config, is_loopback
from router.errors import BadRequest, ComplementError, PayloadTooLarge, Unauthorized
from router.frontier import FrontierClient
from router.metrics import Metrics
from router.registry import Registry
from router.routing import Router

__all__ = ["app_from_env", "create_app"]

log = logging.getLogger(__name__)

#: Specialist areas that contribute an APIRouter (``<module>.router``).
AREA_ROUTERS = ("specialists.apply.api", "specialists.tab.api", "retrieval.api", "router.loop.api",
                "router.api_edit")
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _error_response(exc: ComplementError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return JSONResponse(exc.to_openai(), status_code=exc.status_code, headers=headers)


async def _send_error(send: Send, exc: ComplementError) -> None:
    response = _error_response(exc)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


class GuardMiddleware:
    """API keys and the body-size limit, checked before any endpoint code runs."""

    def __init__(self, app: ASGIApp, api_keys: list[str], max_body_bytes: int) -> None:
        self.app = app
        self.api_keys = [k.encode() for k in api_keys]
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.api_keys and scope["path"] not in OPEN_PATHS and not self._authorised(scope):
            await _send_error(send, Unauthorized(
                "missing or wrong API key: send 'Authorization: Bearer <key>' with a key "
                "listed under server.api_keys"))
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _send_error(send, self._too_large())
            return
        await self.app(scope, self._counting(receive), send)

    def _authorised(self, scope: Scope) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return any(hmac.compare_digest(token.strip(), key) for key in self.api_keys)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"the request body is over the limit of {self.max_body_bytes} "
                               "bytes (server.max_body_bytes)")

    def _counting(self, receive: Receive) -> Receive:
        seen = 0

        async def wrapped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise self._too_large()
            return message

        return wrapped


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ComplementError)
    async def _ours(request: Request, exc: ComplementError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        param = ".".join(loc) or None
        return _error_response(BadRequest(f"{param or 'body'}: {err.get('msg')}", param=param))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = ComplementError(str(exc.detail))
        error.status_code = exc.status_code
        error.error_type = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error_response(error)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return _error_response(ComplementError(
            f"internal error ({type(exc).__name__}); the server logged the details"))


def _include_area_routers(app: FastAPI) -> None:
    for module_name in AREA_ROUTERS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that area is not built into this install
            raise
        app.include_router(module.router)


def create_app(config: Config, *, registry: Registry | None = None) -> FastAPI:
    """An app for ``config``; pass ``registry`` to run with specialists built elsewhere."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from starlette.concurrency import run_in_threadpool

        from router.events import EventStore

        app.state.events = await run_in_threadpool(
            EventStore, config.events_url(), feedback_timeout_s=config.events.feedback_timeout_s)
        from router.metrics import EventMetrics

        app.state.metrics.registry.register(EventMetrics(app.state.events))
        reg = registry if registry is not None else Registry.from_config(config.specialists)
        await run_in_threadpool(reg.setup_all)
        app.state.registry = reg
        app.state.router = Router(config.routes, app.state.frontier, reg)
        try:
            yield
        finally:
            app.state.events.close()

    app = FastAPI(title="complement", version="0.1.0", lifespan=lifespan,
                  summary="One OpenAI-compatible API over frontier models and specialists.")
    app.state.config = config
    app.state.metrics = Metrics()
    app.state.frontier = FrontierClient(config.models, config.frontier, config.env_refs)
    _install_handlers(app)
    from router import api_chat, api_feedback, api_system

    app.include_router(api_chat.router)
    app.include_router(api_feedback.router)
    app.include_router(api_system.router)
    _include_area_routers(app)
    if not config.server.api_keys and not is_loopback(config.server.host):
        raise ComplementError("refusing to serve without API keys off loopback")
    app.add_middleware(GuardMiddleware, api_keys=config.server.api_keys,
                       max_body_bytes=config.server.max_body_bytes)
    return app




def app_from_env() -> FastAPI:
    """uvicorn factory for ``complement serve --workers N``: each worker process loads the
    config named by ``COMPLEMENT_CONFIG`` (set by the CLI after validating it)."""
    from router.config import load_config

    return create_app(load_config(os.environ.get("COMPLEMENT_CONFIG") or None))
