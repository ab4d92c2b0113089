"""The floor for this stack: the smallest Starlette + httpx proxy that forwards a chat
completion (plain or streamed) to one upstream and back, byte for byte.

No routing, no validation, no accounting: whatever complement adds beyond what this adds is
the cost of being a router rather than a pipe. ``benchmarks/router_overhead.py`` starts it,
twice: with httpx (the floor the issue names) and with aiohttp (the client complement's
HTTP transport uses, so the pipe and the router differ only in what the router does):

    python benchmarks/passthrough.py --upstream http://127.0.0.1:9000/v1 --port 9001 \
        [--client httpx|aiohttp]
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any, AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


def build_aiohttp_app(upstream: str) -> Starlette:
    import aiohttp

    url = upstream.rstrip("/") + "/chat/completions"
    sessions: list[aiohttp.ClientSession] = []

    async def chat(request: Request) -> Response:
        if not sessions:
            sessions.append(aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=60)))
        body = await request.body()
        upstream_response = await sessions[0].post(
            url, data=body, headers={"content-type": "application/json",
                                     "authorization": "Bearer k"})
        kind = upstream_response.headers.get("content-type", "application/json")
        if kind.startswith("text/event-stream"):
            return StreamingResponse(upstream_response.content.iter_any(), media_type=kind,
                                     status_code=upstream_response.status,
                                     background=BackgroundTask(upstream_response.release))
        data = await upstream_response.read()
        upstream_response.release()
        return Response(data, status_code=upstream_response.status, media_type=kind)

    async def health(request: Request) -> Response:
        return Response(b"ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for session in sessions:
            await session.close()

    routes: list[Any] = [Route("/v1/chat/completions", chat, methods=["POST"]),
                         Route("/healthz", health)]
    return Starlette(routes=routes, lifespan=lifespan)


def build_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=60,
                               limits=httpx.Limits(max_connections=512,
                                                   max_keepalive_connections=512))

    async def chat(request: Request) -> Response:
        body = await request.body()
        sent = client.build_request("POST", "/chat/completions", content=body,
                                    headers={"content-type": "application/json",
                                             "authorization": "Bearer k"})
        upstream_response = await client.send(sent, stream=True)
        kind = upstream_response.headers.get("content-type", "application/json")
        if kind.startswith("text/event-stream"):
            return StreamingResponse(upstream_response.aiter_raw(), media_type=kind,
                                     status_code=upstream_response.status_code,
                                     background=BackgroundTask(upstream_response.aclose))
        data = await upstream_response.aread()
        await upstream_response.aclose()
        return Response(data, status_code=upstream_response.status_code, media_type=kind)

    async def health(request: Request) -> Response:
        return Response(b"ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    routes: list[Any] = [Route("/v1/chat/completions", chat, methods=["POST"]),
                         Route("/healthz", health)]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="base URL ending in /v1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client", choices=("httpx", "aiohttp"), default="httpx")
    args = parser.parse_args()
    build = build_aiohttp_app if args.client == "aiohttp" else build_app
    uvicorn.run(build(args.upstream), host="127.0.0.1", port=args.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
