"""The published contract: ``/openapi.json`` from the same models that validate.

FastAPI's own schema misses what this server does by hand or differently: the bodies of
``/v1/chat/completions`` and ``/v1/feedback`` (parsed by hand, with orjson), the statuses
the server really answers (a malformed body is a 400 in OpenAI's error shape, not
FastAPI's 422; a missing step is a 409; a 503 says when to retry), the content types of
``/metrics`` and of a chat stream, how one answer feeds the next request (OpenAPI links:
a Tab suggestion's ``request_id`` → its feedback, ``/v1/index`` → ``/v1/retrieve``, a deploy
→ its rollback, a canary → promote or abort), and examples that work on this server (its
routes, its policy versions, a repository under its allowed root).

:func:`install` makes ``app.openapi`` build it; the static part is built once, the examples
are read from the server's state on each call (they change as versions are published).
``router.contract`` fuzzes the server against it (Schemathesis, every phase).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = ["ERROR_SCHEMA", "contract_schema", "install"]

ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["message", "type"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]},
                       "code": {"type": ["string", "null"]}}}},
}

_STATUS_TEXT = {
    400: "The request is malformed or a field is out of bounds: the message names the field.",
    401: "Missing or wrong API key, or a revoked or expired virtual key (only when the "
         "server has keys).",
    402: "The route's budget, or the virtual key's max_budget, would be exceeded: the "
         "message names which and the amounts.",
    403: "A path outside the allowed roots, an action the config does not allow, an admin "
         "endpoint without the admin key, or a route the virtual key may not use.",
    404: "What the request names (a route, an id, a version, a directory) does not exist.",
    408: "The request body stalled (server.body_timeout_s) or was not whole by "
         "server.body_deadline_s.",
    409: "The request contradicts the server's state; the message names the step to take.",
    413: "The request body is over server.max_body_bytes, or (apply, edit) more files or "
         "file text than server.max_files_per_request / max_text_bytes_per_request.",
    415: "A POST without 'Content-Type: application/json' (a body-less one too).",
    429: "The frontier provider is rate limiting, or the virtual key is over its rpm_limit "
         "or tpm_limit (Retry-After says when to come back).",
    499: "The client closed the connection before its request was whole.",
    502: "The frontier provider failed.",
    503: "Not ready yet (a specialist still loading; Retry-After says when to come back), "
         "or a frontier model without a key (the message names it).",
    504: "The frontier provider timed out.",
}

_BODY = (400, 401, 408, 413, 415)
_NO_BODY = (401,)
_NO_BODY_POST = (401, 415)
"""A POST without a body still needs the JSON content type (a form POST is refused)."""
_FRONTIER = (402, 429, 502, 503, 504)
_KEYED = (402, 403, 429)
"""What a virtual key's limits answer, on any endpoint that needs a key (``router.keys``)."""
_ADMIN = (403, 409)
"""Key management: the admin key's alone (403), on a server that has one (409)."""
#: (method, path) → the error statuses it answers, besides 200.
_ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/v1/chat/completions"): _BODY + (404,) + _FRONTIER,
    ("get", "/v1/models"): _NO_BODY,
    ("get", "/healthz"): (),
    ("get", "/readyz"): (503,),
    ("get", "/metrics"): _NO_BODY,
    ("post", "/v1/feedback"): _BODY + (404, 409, 503),
    ("post", "/v1/tab"): _BODY + (409, 503),
    ("post", "/v1/tab/deploy"): _BODY + (404, 409, 503),
    ("post", "/v1/tab/canary"): _BODY + (404, 409, 503),
    ("post", "/v1/tab/canary/promote"): _NO_BODY_POST + (404, 409, 503),
    ("post", "/v1/tab/canary/abort"): _NO_BODY_POST + (503,),
    ("get", "/v1/tab/versions"): _NO_BODY,
    ("post", "/v1/apply"): _BODY + (503,),
    ("post", "/v1/index"): _BODY + (403, 404, 503),
    ("post", "/v1/retrieve"): _BODY + (403, 404, 409, 503),
    ("post", "/v1/edit"): _BODY + (403, 404, 409) + _FRONTIER,
    ("get", "/v1/dashboard"): _NO_BODY,
    ("post", "/key/generate"): _BODY + _ADMIN,
    ("get", "/key/info"): (400,) + _NO_BODY + (404,) + _ADMIN,
    ("get", "/key/list"): _NO_BODY + _ADMIN,
    ("post", "/key/update"): _BODY + (404,) + _ADMIN,
    ("post", "/key/delete"): _BODY + (404,) + _ADMIN,
}
#: Operations no key is needed for (the rest may answer a virtual key's 402, 403, 429).
_OPEN = {("get", "/healthz"), ("get", "/readyz")}

#: (source method, path, status) → links from its answer: name → (target method, path,
#: request body with runtime expressions, whether to merge it into a generated body).
_LINKS: dict[tuple[str, str], dict[str, tuple[str, str, Any, bool]]] = {
    ("post", "/v1/tab"): {
        "Feedback": ("post", "/v1/feedback",
                     {"request_id": "$response.body#/request_id", "outcome": "accepted"}, False),
    },
    ("post", "/v1/index"): {
        "Retrieve": ("post", "/v1/retrieve",
                     {"repo": "$response.body#/repo", "query": "add two numbers"}, True),
    },
    ("post", "/v1/tab/deploy"): {
        "Rollback": ("post", "/v1/tab/deploy",
                     {"version": "$response.body#/previous", "event": "rollback"}, False),
        # a keystroke answered by the version just deployed (its answer links to feedback)
        "Suggest": ("post", "/v1/tab", {"file": "def add(a, b):\n    return ", "cursor": 26,
                                        "language": "python", "path": "calc/ops.py"}, True),
    },
    ("post", "/v1/tab/canary"): {
        "Promote": ("post", "/v1/tab/canary/promote", None, False),
        "Abort": ("post", "/v1/tab/canary/abort", None, False),
    },
    ("get", "/v1/tab/versions"): {
        "Deploy": ("post", "/v1/tab/deploy", {"version": "$response.body#/deployed"}, False),
    },
}


def install(app: Any) -> None:
    """``app.openapi`` (and so ``/openapi.json`` and ``/docs``) serves :func:`contract_schema`."""
    app.openapi = lambda: contract_schema(app)


def contract_schema(app: Any) -> dict[str, Any]:
    """The app's OpenAPI schema with the contract filled in (see the module docstring)."""
    base = getattr(app.state, "openapi_base", None)
    if base is None:
        base = app.state.openapi_base = _static_schema(app)
    schema = copy.deepcopy(base)
    _examples(schema, app.state)
    return schema


def _static_schema(app: Any) -> dict[str, Any]:
    from fastapi.openapi.utils import get_openapi

    from router.api.chat import ChatRequest
    from router.api.feedback import FeedbackBatch, FeedbackItem

    schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                         description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    components["Error"] = ERROR_SCHEMA
    paths = schema["paths"]
    paths["/v1/chat/completions"]["post"]["requestBody"] = _body(
        _model_schema(ChatRequest, components))
    _chat_params(components["ChatRequest"], app.state)
    paths["/v1/feedback"]["post"]["requestBody"] = _body({"oneOf": [
        _model_schema(FeedbackItem, components), _model_schema(FeedbackBatch, components)]})
    ids = {(m, p): op["operationId"] for p, ops in paths.items() for m, op in ops.items()}
    for path, ops in paths.items():
        for method, op in ops.items():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            statuses = set(_ERRORS.get((method, path), _BODY if "requestBody" in op else ()))
            if (method, path) not in _OPEN:
                statuses |= set(_KEYED)
            for status in sorted(statuses):
                responses[str(status)] = _error_response(status)
            for name, (t_method, t_path, body, merge) in _LINKS.get((method, path), {}).items():
                link: dict[str, Any] = {"operationId": ids[(t_method, t_path)],
                                        "description": f"{name}: {t_method.upper()} {t_path} "
                                                       "with what this answer returned"}
                if body is not None:
                    link["requestBody"] = body
                    link["x-schemathesis"] = {"merge_body": merge}
                responses["200"].setdefault("links", {})[name] = link
    _content_types(paths)
    _added_areas(components, app.state)
    return schema


def _added_areas(components: dict[str, Any], state: Any) -> None:
    """The areas a config's ``endpoints:`` adds, in the list a key's ``allowed_routes``
    may name (``router.api.keys.Area``)."""
    added = sorted({area for _, area in getattr(state, "endpoint_areas", ())})

    def extend(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("enum"), list) and "chat" in node["enum"]:
                node["enum"] = [*node["enum"], *added]
            for value in node.values():
                extend(value)
        elif isinstance(node, list):
            for value in node:
                extend(value)

    if added:
        for component in components.values():
            extend(component.get("properties", {}).get("allowed_routes"))


def _chat_params(chat: dict[str, Any], state: Any) -> None:
    """The model parameters a client may add, by name (anything else is a 400)."""
    from router.provider_params import PARAM_SCHEMAS, allowed_params

    config = getattr(state, "config", None)
    extra = set(config.frontier.allowed_params) if config is not None else set()
    for name in sorted(allowed_params(extra)):
        described: dict[str, Any] = {
            "description": "a model parameter, passed on to the provider as it is"}
        if name in PARAM_SCHEMAS:
            described["anyOf"] = [PARAM_SCHEMAS[name], {"type": "null"}]
        chat["properties"].setdefault(name, described)
    chat["additionalProperties"] = False


def _model_schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    body = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in body.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components[model.__name__] = body
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _error_response(status: int) -> dict[str, Any]:
    out: dict[str, Any] = {"description": _STATUS_TEXT[status], "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if status in (429, 503):
        out["headers"] = {"Retry-After": {
            "description": "Seconds to wait before retrying (absent when no wait helps).",
            "schema": {"type": "string"}}}
    if status == 401:
        out["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    return out


def _content_types(paths: dict[str, Any]) -> None:
    """What the server sends that FastAPI does not know: Prometheus text, SSE, readiness."""
    paths["/metrics"]["get"]["responses"]["200"] = {
        "description": "Prometheus metrics.", "content": {"text/plain": {"schema": {
            "type": "string"}}}}
    chat = paths["/v1/chat/completions"]["post"]["responses"]
    chat["200"] = {"description": "A chat completion (OpenAI's shape, plus 'complement'), or "
                                  "with stream: true, server-sent chunks ending in [DONE].",
                   "content": {"application/json": {"schema": {"type": "object"}},
                               "text/event-stream": {"schema": {
                                   "type": "object", "properties": {"data": {"type": "string"}}}}}}
    ready = {"type": "object", "required": ["status", "specialists"],
             "properties": {"status": {"type": "string"},
                            "specialists": {"type": "object"}}}
    paths["/readyz"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] = ready
    paths["/readyz"]["get"]["responses"]["503"] = {
        "description": "A specialist still loads, or failed to.",
        "content": {"application/json": {"schema": ready}}}


# -- examples that work on this server ---------------------------------------------------------
def _examples(schema: dict[str, Any], state: Any) -> None:
    config = getattr(state, "config", None)
    routes = sorted(config.routes) if config is not None else []
    paths = schema["paths"]
    tab_file = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return "
    bodies: dict[str, dict[str, Any]] = {
        "/v1/tab": {"file": tab_file, "cursor": len(tab_file), "language": "python", "path": "calc/ops.py",
                    "session": "example-editor", "seq": 1},
        "/v1/apply": {"original": "def add(a, b):\n    return a + b\n",
                      "sketch": "def add(a, b):\n    \"\"\"Sum.\"\"\"\n    return a + b\n",
                      "path": "calc/ops.py"},
        "/v1/retrieve": {"query": "add two numbers", "k": 5},
        "/v1/feedback": {"request_id": "a request_id from POST /v1/tab",
                         "outcome": "accepted"},
    }
    index_path = _example_repo(state)
    if index_path is not None:
        bodies["/v1/index"] = {"path": index_path}
    if routes:
        route = "fast" if "fast" in routes else routes[0]
        bodies["/v1/chat/completions"] = {"model": route, "messages": [
            {"role": "user", "content": "Say hello."}]}
        bodies["/v1/edit"] = {"instruction": "add a docstring to add", "route": route,
                              "texts": {"calc/ops.py": "def add(a, b):\n    return a + b\n"}}
        chat = schema["components"]["schemas"]["ChatRequest"]
        chat["properties"]["model"]["enum"] = routes
        chat["properties"]["model"]["description"] = "a route (GET /v1/models lists them)"
    versions = _versions(state)
    if versions is not None:
        deployed, known = versions
        bodies["/v1/tab/deploy"] = {"version": deployed, "event": "deploy"}
        candidate = next((v for v in reversed(known) if v != deployed), None)
        if candidate is not None:
            bodies["/v1/tab/canary"] = {"version": candidate, "share": 0.1}
    for path, example in bodies.items():
        op = paths.get(path, {}).get("post")
        if op is not None and "requestBody" in op:
            op["requestBody"]["content"]["application/json"]["examples"] = {
                "working": {"value": example}}


def _example_repo(state: Any) -> str | None:
    """A directory under the retriever's allowed root, relative to it (no absolute path is
    shown): the first repository there, else the root itself."""
    registry = getattr(state, "registry", None)
    retriever = registry.find("retrieval") if registry is not None else None
    from specialists.base import Rooted, capabilities

    root = retriever.allowed_root if retriever is not None and Rooted in capabilities(
        retriever) else None
    if root is None:
        return None
    try:
        dirs = sorted(p.name for p in Path(root).iterdir()
                      if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return None
    return dirs[0] if dirs else "."


def _versions(state: Any) -> tuple[int, list[int]] | None:
    config = getattr(state, "config", None)
    registry = getattr(state, "registry", None)
    if config is None or registry is None or registry.find("tab") is None:
        return None
    from specialists.tab.loop.versions import PolicyStore

    try:
        store = PolicyStore(config.data_path() / "tab")
        deployed, known = store.deployed(), store.versions()
    except (OSError, ValueError):
        return None
    return (deployed, known) if deployed is not None else None
