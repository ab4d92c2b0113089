"""Request bodies decoded strictly, for the endpoints whose bodies FastAPI parses.

FastAPI decodes JSON with the standard library, which takes a lone surrogate (the escape
``"\\ud800"``, or the bytes ``ED A0 80``) for text. It is not text: the first code that
encodes such a string (a path, a response, the database) fails, and the request ends in a
500 (found by ``benchmarks/reliability.py``: /v1/apply, /v1/edit, /v1/retrieve). Routes of
class ``JSONRoute`` decode with orjson instead, as ``/v1/chat/completions`` and
``/v1/feedback`` already do, so lone surrogates, invalid UTF-8, ``NaN`` and nesting deeper
than 1024 levels are a 400 that says where.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Callable, Coroutine

import orjson
from fastapi.routing import APIRoute
from pydantic import BeforeValidator, Field
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["BLANK", "EscapedSurrogatesRoute", "FILE_PATH", "JSON_SAFE", "JSONInt", "JSONRoute",
           "NOT_BLANK", "PATH", "json_int"]

#: What Python's ``str.strip()`` removes (``str.isspace``), spelled out: ``\s`` means
#: other sets to Python's ``re``, to pydantic's Rust regex and to a JSON Schema validator,
#: so a pattern using it lets through what the server then refuses as blank (``"\x1d"``).
BLANK = (r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f"
         r"\u3000")
#: Text that is not only blanks.
NOT_BLANK = rf"[^{BLANK}]"
#: A directory path: not only blanks, no NUL.
PATH = rf"^[^\x00]*[^\x00{BLANK}][^\x00]*$"
#: A file's path relative to a repository: names something (not only ``.``, ``/``, ``\``
#: and blanks), no NUL.
FILE_PATH = rf"^[^\x00]*[^\x00/\\.{BLANK}][^\x00]*$"


def _integral(value: Any) -> Any:
    """A JSON number that is a whole number (``3.0``) is an integer, as JSON Schema says."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An integer as JSON Schema has it: ``3`` and ``3.0``, never ``true`` or ``"3"`` (with the
#: models' ``strict=True``), so the published schema and validation agree.
JSONInt = Annotated[int, BeforeValidator(_integral)]


#: The largest integer a JSON number carries exactly (a double's 53 bits).
JSON_SAFE = 2**53 - 1


def json_int(**bounds: int) -> Any:
    """:data:`JSONInt` with bounds (``ge``, ``le``, ...) that the JSON schema shows too (put
    after the validator, pydantic would leave them out of the schema inside a union).

    Without an upper (lower) bound, ``le`` (``ge``) is ±:data:`JSON_SAFE`: orjson reads an
    integer past 64 bits as a float, :func:`_integral` makes it a Python integer again, and
    that integer crashed the first code that wrote it out (a ``max_tokens`` of 5.7e23 ended
    as a 502 when the provider call encoded it). Now it is a 400 that names the field."""
    if not {"le", "lt"} & bounds.keys():
        bounds["le"] = JSON_SAFE
    if not {"ge", "gt"} & bounds.keys():
        bounds["ge"] = -JSON_SAFE
    return Annotated[int, Field(**bounds), BeforeValidator(_integral)]


class _StrictRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            # orjson.JSONDecodeError is a json.JSONDecodeError: FastAPI reports it as such
            self._json = orjson.loads(await self.body())
        return self._json


class _EscapesRequest(_StrictRequest):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            try:
                self._json = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                try:  # bytes that are UTF-8, with a lone surrogate written as an escape
                    self._json = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise exc from None  # bytes that are not UTF-8, or not JSON
        return self._json


class JSONRoute(APIRoute):
    """An ``APIRoute`` whose JSON bodies are decoded by orjson (``APIRouter(route_class=)``)."""

    request_class: type[Request] = _StrictRequest

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        request_class = self.request_class

        async def strict(request: Request) -> Response:
            return await handler(request_class(request.scope, request.receive))

        return strict


class EscapedSurrogatesRoute(JSONRoute):
    """:class:`JSONRoute` for ``/v1/tab``: bytes that are not UTF-8 are the same 400 as
    anywhere, but a lone surrogate written as a JSON escape (``"\\udc80"``, which an
    editor's UTF-16 string can hold) is decoded, so the keystroke is answered "no
    suggestion" with the reason, not refused on every key in that file."""

    request_class = _EscapesRequest
