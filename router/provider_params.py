"""Which fields of a client's chat request may reach a provider: model parameters only.

A chat request's extra fields used to go to ``litellm.acompletion`` as they came, and
litellm reads some of its keyword arguments as *where and how* to call the provider: a
client's ``api_base`` (or ``base_url``) won for any model whose config set none, and the
server's key went with the request to whatever URL the client named (issue 41, F1). So the
fields a client may send are an allow-list of model parameters (:data:`MODEL_PARAMS`, plus
any an operator adds under ``frontier.allowed_params``); every other field is refused with a
400 that names it. Fields that name a connection, a credential, headers, a callback or a
price (:data:`CONNECTION_PARAMS`) can never be allowed, not even by the config.

:func:`provider_params` is the second line: what the frontier client passes on is filtered
again, so a caller inside the server that forgets the first check still cannot redirect.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

__all__ = ["CONNECTION_PARAMS", "MODEL_PARAMS", "PARAM_SCHEMAS", "allowed_params",
           "check_request_params", "provider_params"]

MODEL_PARAMS = frozenset({
    # OpenAI chat completions
    "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "tools", "tool_choice", "parallel_tool_calls", "response_format",
    "functions", "function_call", "reasoning_effort", "verbosity", "modalities", "audio",
    "prediction", "service_tier", "store", "metadata", "web_search_options",
    "stream_options",
    # other providers' sampling and reasoning knobs, as litellm maps them
    "top_k", "thinking",
})
"""Model parameters a client may send: they change what the model writes, not where the
request goes or with which credentials."""

_NUMBER = {"type": "number"}
_INTEGER = {"type": "integer"}
_STRING = {"type": "string"}
_BOOLEAN = {"type": "boolean"}
_OBJECT = {"type": "object"}
PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    **{name: _NUMBER for name in ("temperature", "top_p", "presence_penalty",
                                   "frequency_penalty")},
    **{name: _INTEGER for name in ("n", "top_logprobs", "seed", "top_k")},
    **{name: _STRING for name in ("user", "reasoning_effort", "verbosity", "service_tier")},
    **{name: _BOOLEAN for name in ("logprobs", "parallel_tool_calls", "store")},
    **{name: _OBJECT for name in ("logit_bias", "response_format", "audio", "prediction",
                                   "metadata", "web_search_options", "thinking")},
    "stop": {"anyOf": [_STRING, {"type": "array", "items": _STRING}]},
    "tools": {"type": "array", "items": _OBJECT},
    "functions": {"type": "array", "items": _OBJECT},
    "modalities": {"type": "array", "items": _STRING},
    "tool_choice": {"anyOf": [_STRING, _OBJECT]},
    "function_call": {"anyOf": [_STRING, _OBJECT]},
}
"""The JSON type of each model parameter (``null`` is accepted for every one: "not set").
A value of another type is a 400 naming the field, not a provider's crash three layers down
(a ``tools`` that is a number reached litellm as one). ``max_tokens``,
``max_completion_tokens`` and ``stream_options`` are typed by the request model; a
parameter the operator adds under ``frontier.allowed_params`` is passed on as it comes."""

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float), "integer": (int,), "string": (str,), "boolean": (bool,),
    "object": (dict,), "array": (list,)}


def _matches(value: Any, schema: Mapping[str, Any]) -> bool:
    if "anyOf" in schema:
        return any(_matches(value, sub) for sub in schema["anyOf"])
    kind = schema["type"]
    if isinstance(value, bool) and kind != "boolean":
        return False  # JSON's true is not a number
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return True  # JSON Schema's integer: 3.0 is one (and orjson reads past 64 bits so)
    if not isinstance(value, _PY_TYPES[kind]):
        return False
    if kind == "array":
        return all(_matches(item, schema["items"]) for item in value)
    return True


def _described(schema: Mapping[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_described(sub) for sub in schema["anyOf"])
    if schema["type"] == "array":
        return f"an array of {schema['items']['type']}s"
    kind = schema["type"]
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"

CONNECTION_PARAMS = frozenset({
    "api_base", "base_url", "api_key", "api_version", "api_type", "organization",
    "headers", "extra_headers", "extra_body", "extra_query", "default_headers",
    "custom_llm_provider", "model_list", "deployment_id", "engine", "azure_ad_token",
    "azure_ad_token_provider", "aws_access_key_id", "aws_secret_access_key",
    "aws_session_token", "aws_region_name", "aws_profile_name", "vertex_project",
    "vertex_location", "vertex_credentials", "callbacks", "success_callback",
    "failure_callback", "input_callback", "service_account_json", "client", "http_client",
    "timeout", "request_timeout", "num_retries", "max_retries", "fallbacks",
    "context_window_fallbacks", "mock_response", "input_cost_per_token",
    "output_cost_per_token", "litellm_params", "litellm_logging_obj", "proxy_server_request",
    "base_model", "ssl_verify", "model", "messages", "stream",
})
"""Fields that name where the provider is called, with what credentials, headers,
callbacks, retries or prices: the server's config alone decides those."""


def allowed_params(extra_allowed: Iterable[str] = ()) -> frozenset[str]:
    """The fields a request may pass on: :data:`MODEL_PARAMS` and the operator's
    ``frontier.allowed_params``, never a connection field."""
    return (MODEL_PARAMS | frozenset(extra_allowed)) - CONNECTION_PARAMS


def check_request_params(params: Mapping[str, Any], extra_allowed: Iterable[str] = (),
                         request_fields: Iterable[str] = ()) -> None:
    """Raise ``BadRequest`` naming the first field of ``params`` a client may not send
    (an unknown one with its nearest name among the allowed and ``request_fields``, the
    request's own)."""
    from router.errors import BadRequest

    allowed = allowed_params(extra_allowed)
    for name in params:
        if name in CONNECTION_PARAMS:
            raise BadRequest(
                f"field {name!r} is not accepted: it says where, or with which credentials, "
                "headers or callbacks, the provider is called, and only the server's config "
                "decides that (models.<name> in the config); remove it from the request",
                param=name)
        if name not in allowed:
            near = difflib.get_close_matches(name, sorted(allowed | set(request_fields)), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise BadRequest(
                f"{name}: unknown field; remove it{hint}, or, if it is a model parameter, "
                f"ask the operator to list it under frontier.allowed_params (passed on now: "
                f"{', '.join(sorted(allowed))})", param=name)
        schema = PARAM_SCHEMAS.get(name)
        value = params[name]
        if schema is not None and value is not None and not _matches(value, schema):
            raise BadRequest(f"field {name!r} must be {_described(schema)} (or null), not "
                             f"{type(value).__name__} {str(value)[:60]!r}", param=name)


def provider_params(params: Mapping[str, Any], extra_allowed: Iterable[str] = ()) -> dict[str, Any]:
    """``params`` less every field that is not an allowed model parameter (connection fields
    never pass, whatever the config allows)."""
    allowed = allowed_params(extra_allowed)
    return {k: _as_sent(k, v) for k, v in params.items() if k in allowed}


def _as_sent(name: str, value: Any) -> Any:
    """An integer parameter that came as a whole float (``3.0``) goes on as ``3``; one past
    64 bits stays a float (JSON writers take no such int; the provider says what it makes of
    it)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63 and \
            PARAM_SCHEMAS.get(name, {}).get("type") == "integer":
        return int(value)
    return value
