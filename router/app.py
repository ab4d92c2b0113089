"""The app factory: wires config, specialists, the frontier client and the API routers.

Nothing is loaded at import. ``create_app(config)`` builds an app whose ``lifespan`` builds
the registry (loading models in each specialist's ``setup``), so tests can pass their own.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router.config import Config, is_loopback
from router.errors import (
    BadRequest,
    ComplementError,
    ConfigError,
    Forbidden,
    PayloadTooLarge,
    RequestTimeout,
    Unauthorized,
    UnsupportedMediaType,
    error_response,
    install_handlers,
)
from router.frontier import FrontierClient
from router.keys import ADMIN, Charge, KeyGate, VirtualKey, is_admin_path
from router.metrics import Metrics
from router.registry import Registry
from router.routing import Router
from router.service.tab import TabService
from specialists.base import HasWorkers, SpecialistError, capabilities

__all__ = ["app_from_env", "create_app"]

log = logging.getLogger(__name__)

#: One module per endpoint group, each with an APIRouter named ``router``.
AREA_ROUTERS = ("router.api.chat", "router.api.system", "router.api.feedback", "router.api.tab",
                "router.api.apply", "router.api.retrieval", "router.api.edit",
                "router.api.playground", "router.api.keys")
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
_NO_KEYS = ("refusing to serve on {host} without API keys: off loopback every endpoint but "
            "/healthz and /readyz needs one, and the admin endpoints (deploy, canary, /key/*) "
            "the admin key. Set COMPLEMENT_API_KEY and COMPLEMENT_ADMIN_KEY (the default "
            "config reads them into server.api_keys and server.admin_keys) or list keys "
            "there, or bind 127.0.0.1")


async def _send_error(send: Send, exc: ComplementError) -> None:
    response = error_response(exc)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


#: The area each API path belongs to, by prefix: the ``x-complement-route`` header and the
#: metrics' route label of responses no route names itself (errors, specialists), and the
#: area a virtual key's ``allowed_routes`` is checked against (``router.keys.AREAS``). A
#: path no prefix names is ``system``; every ``/v1`` endpoint but the system ones
#: (``SYSTEM_PATHS``) must be named here (``tests/router/test_areas.py`` checks it).
_PATH_ROUTES = (("/v1/chat/", "chat"), ("/v1/tab", "tab"), ("/v1/feedback", "feedback"),
                ("/v1/apply", "apply"), ("/v1/edit", "edit"), ("/v1/retrieve", "retrieval"),
                ("/v1/index", "retrieval"))


#: The ``/v1`` paths that belong to no area: listing models, the dashboard's data.
SYSTEM_PATHS = frozenset({"/v1/models", "/v1/dashboard"})


def _route_of(path: str, app: Any = None) -> str:
    """The area of ``path``: the config's ``endpoints:`` groups' (on ``app``), then the
    built-in table; ``system`` when none names it."""
    added = getattr(getattr(app, "state", None), "endpoint_areas", ())
    return next((route for prefix, route in (*added, *_PATH_ROUTES) if path.startswith(prefix)),
                "system")


class HeadersMiddleware:
    """Every response, errors included, says which route and model served it, what it cost
    and how long it took (``x-complement-*``). An endpoint that knows better sets them
    itself, or puts ``complement_route`` / ``complement_model`` / ``complement_cost_usd`` on
    ``request.state``; the rest are filled in here."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._observe(scope, state, message["status"], started)
                headers = MutableHeaders(scope=message)
                defaults = {
                    "x-complement-route": state.get("complement_route")
                    or _route_of(scope["path"], scope.get("app")),
                    "x-complement-model": state.get("complement_model") or "none",
                    "x-complement-cost-usd": f"{float(state.get('complement_cost_usd') or 0):.8f}",
                    "x-complement-latency-ms": f"{(time.perf_counter() - started) * 1000:.1f}"}
                for key, value in defaults.items():
                    if key not in headers:
                        headers[key] = value
            await send(message)

        await self.app(scope, receive, wrapped)

    def _observe(self, scope: Scope, state: dict[str, Any], status: int,
                 started: float) -> None:
        """The specialists' endpoints into the same metrics as chat (which records its own,
        with the trace); health, metrics and the page are not requests of a route."""
        route = state.get("complement_route") or _route_of(scope["path"], scope.get("app"))
        if self.metrics is None or route == "system" or scope["path"].startswith("/v1/chat/"):
            return
        self.metrics.observe(route, state.get("complement_model") or "none", status,
                             time.perf_counter() - started,
                             float(state.get("complement_cost_usd") or 0))


#: Methods that change state: each needs ``Content-Type: application/json`` (issue 41, F7).
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class GuardMiddleware:
    """What is checked before any endpoint code runs: the API key, and who it is
    (``router.keys``: the admin key alone reaches the admin endpoints; a virtual key only
    within its routes, budget and rates, its cost settled before its answer leaves); on a
    server without
    keys, the ``Host`` and ``Origin`` headers (DNS rebinding, cross-site requests); a JSON
    content type on every state-changing request; the body's size, its stalls and its
    whole-body deadline.

    Cross-site requests (issue 41, F7). A web page can make a browser send a "simple"
    request anywhere — a form POST, or a ``fetch`` with a ``text/plain`` body — without
    asking the server first; a ``Content-Type: application/json`` request it can only send
    to its own origin (anything else needs a CORS preflight, which this server never
    grants). So every POST, PUT, PATCH and DELETE must say ``application/json`` (with any
    parameters), a body-less one too (``POST /v1/tab/canary/promote``): 415 otherwise.
    This holds with API keys as well, so a client works the same against any server.
    Without API keys (loopback only), a page could also reach the server under a name of
    its own that resolves to 127.0.0.1 (DNS rebinding), so the ``Host`` must name the
    server — a loopback name or address (``localhost``, ``127.0.0.1``, ``[::1]``), the
    address the connection came in on, ``server.host`` or one of ``server.allowed_hosts``
    (400 otherwise); any port, as SSH and editor port forwards change it — and an
    ``Origin``, when sent, must be the server's own (``http://`` or ``https://`` and the
    ``Host`` the request came with; 403 otherwise). With API keys the bearer token is the
    defence (a page can neither read it nor send it cross-site), and any host name is
    answered, as a server behind a load balancer must be."""

    def __init__(self, app: ASGIApp, keys: KeyGate, max_body_bytes: int,
                 body_timeout_s: float = 30.0, body_deadline_s: float = 60.0,
                 host: str = "127.0.0.1", allowed_hosts: list[str] | None = None) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.body_deadline_s = body_deadline_s
        self.host_names = {_host_name(h) for h in [host, *(allowed_hosts or [])] if h}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        state = scope.setdefault("state", {})
        if self.keys.auth_on:
            principal = await self.keys.identify(_bearer(headers))
            authorised = principal is not None
            if scope["path"] not in OPEN_PATHS:
                refusal = self._refusal(scope, principal)
                if refusal is not None:
                    await _send_error(send, refusal)
                    return
        else:
            refusal = self._cross_site(scope, headers)
            if refusal is not None:
                await _send_error(send, refusal)
                return
            authorised, principal = True, ADMIN  # no keys: loopback only, checks above passed
        state["complement_principal"] = principal
        scope.setdefault("state", {})["complement_authorised"] = authorised
        if scope["method"] in STATE_CHANGING and not _is_json(headers.get(b"content-type")) \
                and self._takes(scope):
            await _send_error(send, UnsupportedMediaType(
                f"{scope['method']} {scope['path']} needs 'Content-Type: application/json' "
                f"(got {_shown(headers.get(b'content-type'))}), a request without a body "
                "too; e.g. curl -H 'content-type: application/json' -d '{}'"))
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _send_error(send, self._too_large())
            return
        if isinstance(principal, VirtualKey) and scope["path"] not in OPEN_PATHS:
            await self._charged(scope, principal, self._counting(receive), send)
            return
        await self.app(scope, self._counting(receive), send)

    def _refusal(self, scope: Scope, principal: Any) -> ComplementError | None:
        """Why ``principal`` may not make this request (None: it may)."""
        if principal is None:
            return Unauthorized("missing or wrong API key: send 'Authorization: Bearer <key>' "
                                "with a key listed under server.api_keys (or admin_keys), or "
                                "a virtual key from POST /key/generate")
        if is_admin_path(scope["path"]) and principal is not ADMIN:
            has = "the admin key" if self.keys.admin_keys else \
                "the admin key, which this server has none of: set COMPLEMENT_ADMIN_KEY or " \
                "server.admin_keys"
            return Forbidden(f"{scope['method']} {scope['path']} changes what others are "
                             f"served or manages keys: it needs {has}; an inference key "
                             "cannot", code="admin_only")
        if isinstance(principal, VirtualKey):
            try:
                self.keys.admit(principal, _route_of(scope["path"], scope.get("app")))
            except ComplementError as exc:
                return exc
        return None

    async def _charged(self, scope: Scope, key: VirtualKey, receive: Receive,
                       send: Send) -> None:
        """Serve a virtual key's request; its cost is settled (once) before the answer's
        first byte, or — a stream — by the stream before its end (``Charge.deferred``)."""
        state = scope["state"]
        charge = state["complement_charge"] = Charge(self.keys, key)

        async def settle() -> None:
            await charge.settle(state.get("complement_cost_usd"),
                                int(state.get("complement_tokens") or 0))

        async def settling(message: Message) -> None:
            if message["type"] == "http.response.start" and not charge.deferred:
                await settle()
            await send(message)

        try:
            await self.app(scope, receive, settling)
        finally:
            await settle()

    def _takes(self, scope: Scope) -> bool:
        """Does a route take this method on this path? One that does not is answered by
        routing (405 with ``Allow``), not 415: the method is the mistake to name."""
        methods = _route_methods(scope.get("app")).get(scope["path"])
        return methods is None or scope["method"] in methods

    def _cross_site(self, scope: Scope, headers: dict[bytes, bytes]) -> ComplementError | None:
        """Why a request to a server without keys is refused (a foreign ``Host`` or
        ``Origin``), or None."""
        host = headers.get(b"host")
        if host is not None:
            name = _host_name(host.decode("latin-1"))
            server = scope.get("server") or (None, None)
            if not (is_loopback(name) or name in self.host_names
                    or (server[0] is not None and name == _host_name(str(server[0])))):
                return BadRequest(
                    f"Host {_shown(host)} is not a name of this server, which has no API keys "
                    "and so answers only to loopback names (localhost, 127.0.0.1, [::1]) and "
                    "server.host; a name of your own that points here goes under "
                    "server.allowed_hosts", code="host_not_allowed")
        origin = headers.get(b"origin")
        if origin is not None:
            scheme, _, rest = origin.decode("latin-1").strip().lower().partition("://")
            own = host.decode("latin-1").strip().lower() if host is not None else None
            if scheme not in ("http", "https") or not rest or rest != own:
                return Forbidden(
                    f"Origin {_shown(origin)} is not this server's own (http://"
                    f"{own or 'its host'}): a server without API keys refuses requests from "
                    "other sites' pages. Call it from its own page, or from a client that "
                    "sends no Origin, or set server.api_keys", code="cross_origin")
        return None

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"the request body is over the limit of {self.max_body_bytes} "
                               "bytes (server.max_body_bytes)")

    def _counting(self, receive: Receive) -> Receive:
        """``receive`` with the body's limits: its size, a stall of ``body_timeout_s`` and
        a deadline of ``body_deadline_s`` for the whole of it, from its headers."""
        seen = 0
        done = False
        deadline = time.monotonic() + self.body_deadline_s

        async def wrapped() -> Message:
            nonlocal seen, done
            if done:  # the body is in; what follows is a wait for the disconnect
                return await receive()
            left = deadline - time.monotonic()
            try:
                message = await _within(min(self.body_timeout_s, max(left, 0.0)), receive())
            except asyncio.TimeoutError:
                if left <= self.body_timeout_s:
                    raise RequestTimeout(
                        f"the request body did not arrive whole within "
                        f"{self.body_deadline_s:g}s (server.body_deadline_s); send it "
                        "faster, or in several requests") from None
                raise RequestTimeout(f"the request body stalled for {self.body_timeout_s:g}s "
                                     "(server.body_timeout_s); send it whole") from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise self._too_large()
                done = not message.get("more_body", False)
            else:
                done = True
            return message

        return wrapped


def _bearer(headers: dict[bytes, bytes]) -> bytes:
    """The token of ``Authorization: Bearer <token>`` (empty when there is none)."""
    scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else b""


def _host_name(host: str) -> str:
    """The name in a ``Host`` header (or a configured host), lower case, without its port
    or a trailing dot; IPv6 addresses keep their brackets off (``[::1]:80`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        name = host[1:host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        name = host.partition(":")[0]
    else:
        name = host  # a bare name, or a bare IPv6 address (a configured host)
    return name.rstrip(".")


def _is_json(content_type: bytes | None) -> bool:
    """``application/json``, with any parameters (``; charset=utf-8``)."""
    if content_type is None:
        return False
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


def _shown(value: bytes | None) -> str:
    if value is None:
        return "none"
    text = value.decode("latin-1")
    return repr(text if len(text) <= 80 else text[:80] + "...")


def _leaf_routes(app: Any) -> list[Any]:
    """``app``'s routes, those of the routers it included (FastAPI's ``include_router``)
    read through."""
    leaves, routes = [], list(getattr(app, "routes", []))
    while routes:
        route = routes.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            routes.extend(getattr(included, "routes", []))
        else:
            leaves.append(route)
    return leaves


def _route_methods(app: Any) -> dict[str, frozenset[str]]:
    """Each fixed path of ``app``'s routes -> the methods it takes (cached on the app)."""
    if app is None:
        return {}
    cached = getattr(app.state, "route_methods", None) if hasattr(app, "state") else None
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    table: dict[str, set[str]] = {}
    for route in _leaf_routes(app):
        path, methods = getattr(route, "path", None), getattr(route, "methods", None)
        if path and methods and "{" not in path:
            table.setdefault(path, set()).update(methods)
    frozen = {path: frozenset(m) for path, m in table.items()}
    if hasattr(app, "state"):
        app.state.route_methods = frozen
    return frozen


async def _within(seconds: float, awaitable: Awaitable[Message]) -> Message:
    if sys.version_info >= (3, 11):  # a timer on the running task, no task of its own
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)


def _include_area_routers(app: FastAPI) -> None:
    for module_name in AREA_ROUTERS:
        app.include_router(importlib.import_module(module_name).router)


def _include_endpoint_groups(app: FastAPI, config: Config) -> None:
    """The config's ``endpoints:``: each an ``APIRouter`` served beside the built-in groups,
    its paths in the area its block is named by (``docs/adding-a-specialist.md``). A group
    that cannot be loaded, or a path outside ``/v1/`` or served already, fails the start
    naming the block."""
    from fastapi import APIRouter

    areas: list[tuple[str, str]] = []
    served = {getattr(route, "path", None) for route in _leaf_routes(app)}
    for area, block in config.endpoints.items():
        where = f"endpoints.{area}.router"
        module_name, _, name = block.router.partition(":")
        try:
            group = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{where}: cannot load {block.router!r} ({type(exc).__name__}: "
                              f"{exc}); name an APIRouter as package.module:name, importable "
                              "by the server") from exc
        if not isinstance(group, APIRouter):
            raise ConfigError(f"{where}: {block.router!r} is a {type(group).__name__}, not a "
                              "FastAPI APIRouter")
        for route in group.routes:
            path = str(getattr(route, "path", ""))
            if not path.startswith("/v1/") or path in served:
                why = "is served already" if path in served else "is not under /v1/"
                raise ConfigError(f"{where}: path {path!r} {why}; give the group its own "
                                  f"paths, e.g. /v1/{area}")
            served.add(path)
            areas.append((path.split("{")[0], area))
        app.include_router(group)
    app.state.endpoint_areas = tuple(areas)


def _sync_tab_policy(service: TabService, config: Config) -> None:
    """Serve the policy version the store says is deployed (publishing the shipped one as
    the first version on a first start), so the online loop and a restart agree."""
    if service.spec is None:
        return
    try:
        version = service.sync_at_start(canary=True)
    except (OSError, ValueError, SpecialistError) as exc:  # e.g. a read-only data dir:
        # serving goes on with the loaded policy
        log.warning("tab: could not sync the policy store under %s: %s", config.data_path(), exc)
        return
    if version is not None:
        log.info("tab: serving policy version %s", version)


def _start_tab_workers(registry: Registry) -> None:
    """Start the Tab model's worker threads or processes before the server says it is
    ready (the first keystroke must not wait for a process to load torch)."""
    tab = registry.find("tab")
    if tab is None or HasWorkers not in capabilities(tab):
        return
    try:
        tab.start_workers()
    except Exception as exc:  # serving goes on: the first request starts them, or says why
        log.warning("tab: could not start the model workers: %s", exc)


def create_app(config: Config, *, registry: Registry | None = None,
               follow_tab_policy_s: float = 0.0) -> FastAPI:
    """An app for ``config``; pass ``registry`` to run with specialists built elsewhere.
    ``follow_tab_policy_s`` > 0: follow the policy store's deployed Tab version (one of
    several worker processes; :meth:`router.service.tab.TabService.follow_store`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from starlette.concurrency import run_in_threadpool

        from specialists.tab.events import ActionWriter, EventStore

        app.state.events = await run_in_threadpool(
            lambda: EventStore(config.events_url(), **config.events.store_options()))
        from router.keys import KeyStore
        from router.metrics import KeyMetrics

        app.state.keys.store = KeyStore(app.state.events.engine)
        app.state.metrics.registry.register(KeyMetrics(app.state.keys))
        app.state.tab_writer = ActionWriter(app.state.events)  # /v1/tab's rows, group-committed
        from router.metrics import EventMetrics

        app.state.metrics.registry.register(EventMetrics(app.state.events))
        reg = registry if registry is not None else Registry.from_config(config.specialists)
        await run_in_threadpool(reg.setup_all)
        # the Tab service owns the policy and event stores' part in serving (router.service)
        service = app.state.tab_service = TabService(reg.find("tab"), config.data_path(),
                                                     app.state.events)
        await run_in_threadpool(_sync_tab_policy, service, config)
        await run_in_threadpool(_start_tab_workers, reg)
        app.state.registry = reg
        app.state.router = Router(config.routes, app.state.frontier, reg)
        follow = asyncio.ensure_future(service.follow_store(follow_tab_policy_s)) \
            if follow_tab_policy_s > 0 else None
        try:
            yield
        finally:
            if follow is not None:
                follow.cancel()
            await app.state.frontier.aclose()
            await run_in_threadpool(reg.close_all)
            await run_in_threadpool(app.state.tab_writer.close)
            app.state.keys.store.close()
            app.state.events.close()

    app = FastAPI(title="complement", version="0.1.0", lifespan=lifespan,
                  summary="One OpenAI-compatible API over frontier models and specialists.")
    app.state.config = config
    app.state.metrics = Metrics()
    app.state.frontier = FrontierClient(config.models, config.frontier, config.env_refs)
    install_handlers(app)
    _include_area_routers(app)
    _include_endpoint_groups(app, config)
    from router.openapi import install as install_openapi

    install_openapi(app)  # /openapi.json: the contract the server keeps (router.openapi)
    app.state.keys = KeyGate(config.server.admin_keys, config.server.api_keys,
                             cache_s=config.server.key_cache_s)
    if not app.state.keys.auth_on and not is_loopback(config.server.host):
        raise ComplementError(_NO_KEYS.format(host=config.server.host))
    from router.api.tab import TabFastLane

    app.add_middleware(TabFastLane)  # innermost: inside the guard and the headers
    app.add_middleware(GuardMiddleware, keys=app.state.keys,
                       max_body_bytes=config.server.max_body_bytes,
                       body_timeout_s=config.server.body_timeout_s,
                       body_deadline_s=config.server.body_deadline_s,
                       host=config.server.host, allowed_hosts=config.server.allowed_hosts)
    # outermost: the guard's 401 and 413 get the headers too
    app.add_middleware(HeadersMiddleware, metrics=app.state.metrics)
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory for ``complement serve --workers N``: each worker process loads the
    config named by ``COMPLEMENT_CONFIG`` (set by the CLI after validating it)."""
    from router.config import load_config

    return create_app(load_config(os.environ.get("COMPLEMENT_CONFIG") or None),
                      follow_tab_policy_s=1.0)
