"""``POST /v1/apply``: one or several files, each merged or abstained, plus one patch.

The applier comes from the running server's registry (the specialist of kind ``"apply"``)
through the ``uses("apply")`` dependency: swap it in YAML and this endpoint and
``/v1/edit`` both use the new one. A malformed request is the specialist's
``SpecialistError``, which the app's one table maps to 400.
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from router.api.jsonbody import JSONRoute
from router.errors import BadRequest, PayloadTooLarge
from router.registry import uses
from specialists.base import Specialist

__all__ = ["ApplyFile", "ApplyRequest", "apply_response", "check_request_size", "router"]

router = APIRouter(tags=["apply"], route_class=JSONRoute)


class ApplyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    original: str = Field(description="The file as it is now.")
    sketch: str = Field(description="The lazy edit sketch, with '... existing code ...' markers "
                        "in any comment syntax or none; a chat answer with the sketch in "
                        "Markdown fences is read as the fenced code, without a first line "
                        "that only names the file ('// filepath: src/app.js'); line numbers "
                        "copied from a numbered view of the file ('12\\t', '12→', '12: ') "
                        "are taken off. SEARCH/REPLACE blocks, a unified diff or an "
                        "apply_patch envelope are read as such. New lines take the "
                        "original's line endings.")
    path: Optional[str] = Field(default=None, description="Path: names the diff, picks the language.")
    language: Optional[str] = None


#: One file (``original`` + ``sketch``) or several (``files``), never both: in the schema as
#: in validation.
_ONE_FORM = {"oneOf": [
    {"required": ["files"],
     "not": {"anyOf": [{"required": ["original"]}, {"required": ["sketch"]}]}},
    {"required": ["original", "sketch"], "not": {"required": ["files"]}},
]}


class ApplyRequest(BaseModel):
    """One file (``original`` and ``sketch``, with ``path`` and ``language``) or several
    (``files``); not both."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_ONE_FORM)
    original: str = Field(None, description="The file as it is now (one-file form).")  # type: ignore[assignment]
    sketch: str = Field(None, description="The lazy edit sketch (one-file form).")  # type: ignore[assignment]
    path: Optional[str] = None
    language: Optional[str] = None
    files: list[ApplyFile] = Field(None, min_length=1,  # type: ignore[assignment]
                                   description="Several files, each merged or abstained.")


def check_request_size(server: Any, endpoint: str, files: int, texts: list[str]) -> None:
    """A 413 naming the limit and its key when one ``/v1/apply`` or ``/v1/edit`` request
    carries more files, or more bytes of file text, than ``server:`` allows (issue 41,
    F9: 20,000 files in one request kept a worker busy for half a minute)."""
    if files > server.max_files_per_request:
        raise PayloadTooLarge(
            f"{endpoint} takes at most {server.max_files_per_request} files a request "
            f"(server.max_files_per_request); this one has {files}: send them in several "
            "requests", param="files", code="too_many_files")
    size = 0
    for text in texts:
        size += len(text.encode("utf-8", "surrogatepass"))
        if size > server.max_text_bytes_per_request:
            raise PayloadTooLarge(
                f"{endpoint} takes at most {server.max_text_bytes_per_request} bytes of "
                "file text a request (server.max_text_bytes_per_request); this one has more: "
                "send the files in several requests", param="files", code="too_much_text")


@router.post("/v1/apply")
def apply_endpoint(body: ApplyRequest, request: Request,
                   applier: Specialist = Depends(uses("apply"))) -> dict[str, Any]:
    """Merge each sketch; ``status`` is ``applied`` only when every file applied."""
    server = request.app.state.config.server
    both = [k for k in ("original", "sketch") if getattr(body, k) is not None]
    if body.files is not None and both:  # a missing field is the applier's 400, naming it
        raise BadRequest(f"send either 'files' or 'original' and 'sketch', not both (got "
                         f"files and {' and '.join(both)})", param="files")
    if body.files is not None:
        check_request_size(server, "POST /v1/apply", len(body.files),
                           [t for f in body.files for t in (f.original, f.sketch)])
        payload: dict[str, Any] = {"files": [f.model_dump() for f in body.files]}
    else:
        check_request_size(server, "POST /v1/apply", 1, [body.original or "", body.sketch or ""])
        payload = body.model_dump(exclude={"files"})
    return apply_response(applier.answer(payload))


def apply_response(result: Any) -> dict[str, Any]:
    """The ``/v1/apply`` answer for an apply specialist's result (the LSP server's too)."""
    output = result.output or {}
    return {
        "object": "apply.result",
        "status": "abstained" if result.abstained else "applied",
        "reason": result.reason,
        "confidence": result.confidence,
        "files": output.get("files", []),
        "diff": output.get("diff", ""),
    }
