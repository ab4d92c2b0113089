"""HTTP surface of the retriever: ``POST /v1/index`` and ``POST /v1/retrieve``.

Both endpoints reach the configured specialist of kind ``retrieval`` through the
``uses("retrieval")`` dependency, so a test or a team swaps it by config. The
handlers are plain ``def``: FastAPI runs them in its thread pool, so indexing a large
repository does not block the event loop.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from retrieval import Filters
from router.api.jsonbody import NOT_BLANK, PATH, JSONRoute, json_int
from router.registry import uses

__all__ = ["IndexRequest", "RetrieveFilters", "RetrieveRequest", "router"]

router = APIRouter(tags=["retrieval"], route_class=JSONRoute)


class IndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path: str = Field(min_length=1, pattern=PATH,
                      description="repository directory, under the allowed root")


class RetrieveFilters(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path_glob: str | list[str] | None = Field(None, description="e.g. 'src/**/*.py'")
    language: str | list[str] | None = Field(None, description="e.g. 'python'")


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field(min_length=1, max_length=20_000, pattern=NOT_BLANK,
                       description="what to look for (not only blanks)")
    k: json_int(ge=1, le=200) = 10  # type: ignore[valid-type]
    filters: RetrieveFilters | None = None
    repo: str | None = Field(None, min_length=1, pattern=PATH,
                             description="indexed repository (default: the last one)")
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"


@router.post("/v1/index")
def index_repository(body: IndexRequest,
                     retriever: Any = Depends(uses("retrieval"))) -> dict[str, Any]:
    """Index a repository, or refresh it incrementally if it was indexed before."""
    return retriever.index_repo(body.path)  # type: ignore[no-any-return]


@router.post("/v1/retrieve")
def retrieve(body: RetrieveRequest, retriever: Any = Depends(uses("retrieval"))
             ) -> dict[str, Any]:
    """The k best chunks: path, lines, symbol, score and which retriever found each."""
    f = body.filters
    filters = Filters.make(f.path_glob, f.language) if f else None
    return retriever.retrieve(  # type: ignore[no-any-return]
        body.query, body.k, filters, body.repo, body.mode)
