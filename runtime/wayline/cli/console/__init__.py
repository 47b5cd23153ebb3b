"""``wayline console``: a web console and an HTTP API over one world (docs/console.md).

Starlette serves it (under uvicorn): a small, well-kept ASGI toolkit whose only needs are
``anyio`` and, for the server, ``uvicorn``; the pages are plain HTML, JavaScript and CSS in
``static/``, shipped in the wheel, with no build step. Importing this package needs the
``console`` extra (``pip install 'wayline[console]'``)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...client import Client
from .api import Console
from .errors import error_response
from .openapi import document

__all__ = ["create_app", "serve", "server"]

STATIC = Path(__file__).parent / "static"


def create_app(
    client: Client,
    *,
    world_url: str = "",
    token: str | None = None,
    poll_seconds: float = 0.5,
    closing: asyncio.Event | None = None,
) -> Starlette:
    """The console's ASGI app over ``client``'s world. Without ``token`` it is read-only:
    every action answers 403 ``READ_ONLY``. ``closing``, once set, ends every live feed (a
    server shutting down does not wait for browsers to hang up)."""
    console = Console(client, world_url, token, poll_seconds, closing)
    api = console.endpoint

    async def page(request: Request) -> Response:
        # one shell for every page: its script draws the page the path names
        return FileResponse(STATIC / "page.html", media_type="text/html")

    async def openapi(request: Request) -> Response:
        return JSONResponse(document())

    routes = [
        Route("/", page),
        Route("/runs/{run_id}", page),
        Route("/hooks", page),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/openapi.json", openapi),
        Route("/api/info", api(console.info)),
        Route("/api/runs", api(console.list_runs)),
        Route("/api/runs", api(console.start), methods=["POST"]),
        Route("/api/live", api(console.live)),
        Route("/api/runs/{run_id}", api(console.get_run)),
        Route("/api/runs/{run_id}/events", api(console.events)),
        Route("/api/runs/{run_id}/cancel", api(console.cancel), methods=["POST"]),
        Route("/api/runs/{run_id}/terminate", api(console.terminate), methods=["POST"]),
        Route("/api/runs/{run_id}/streams/{name}", api(console.stream)),
        Route("/api/hooks", api(console.hooks)),
        Route("/api/hooks/{token}/resume", api(console.resume_hook), methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "BAD_REQUEST")
        return error_response(
            exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}"
        )

    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


def server(app: Starlette) -> uvicorn.Server:
    """A uvicorn server for ``app``: ``await server.serve(sockets=[sock])`` until SIGINT or
    SIGTERM (or ``server.should_exit = True``). Its shutdown waits at most two seconds for open
    connections: a browser's live feed never hangs up by itself."""
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    return uvicorn.Server(config)


async def serve(app: Starlette, sock: socket.socket, closing: asyncio.Event) -> None:
    """Serve ``app`` on the bound ``sock`` until SIGINT or SIGTERM; then ``closing`` (the one
    the app was made with) ends the live feeds that the bounded shutdown cut off."""
    try:
        await server(app).serve(sockets=[sock])
    finally:
        closing.set()
