"""``wayline console``: a web console and an HTTP API over one world (docs/console.md).

Starlette serves it (under uvicorn): a small, well-kept ASGI toolkit whose only needs are
``anyio`` and, for the server, ``uvicorn``; the pages are plain HTML, JavaScript and CSS in
``static/``, shipped in the wheel, with no build step. Importing this package needs the
``console`` extra (``pip install 'wayline[console]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...client import Client
from .api import Console
from .errors import error_response
from .folds import KEPT_RUNS
from .openapi import document
from .requests import MAX_BODY_BYTES

__all__ = ["create_app", "serve", "server"]

STATIC = Path(__file__).parent / "static"


def create_app(
    client: Client,
    *,
    world_url: str = "",
    token: str | None = None,
    poll_seconds: float = 0.5,
    closing: asyncio.Event | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    schedules_file: Path | None = None,
    allowed_hosts: Sequence[str] | None = None,
    webhook_secrets: Sequence[str] = (),
    read_only: bool = False,
    reads_need_token: bool = False,
    kept_folds: int = KEPT_RUNS,
) -> Starlette:
    """The console's ASGI app over ``client``'s world. Without ``token`` it is read-only:
    every action answers 403 ``READ_ONLY``. ``closing``, once set, ends every live feed (a
    server shutting down does not wait for browsers to hang up). With ``allowed_hosts``, a
    request whose ``Host`` header names another host is refused (400): reads need no token,
    so a web page a developer visits could otherwise read a console on 127.0.0.1 through a
    name it points there (DNS rebinding). ``webhook_secrets`` verify the signatures of
    webhook URLs (``wayline._sdk.webhooks``); without them every webhook answers 503.
    ``read_only`` refuses actions even with a token;
    ``reads_need_token`` makes every API request need it. ``/healthz`` is always open: it is
    what a pod's probes call. ``kept_folds``: how many runs' folds the steps API keeps between
    requests (0: none); the app's ``state.folds`` counts the folds it made."""
    # a hook's recorded type is written by whoever wrote the log: resumes through this app
    # never import the module it names (only modules already imported, such as an --app's)
    console = Console(
        client.without_type_imports(),
        world_url,
        token,
        poll_seconds,
        closing,
        max_body_bytes,
        schedules_file,
        tuple(webhook_secrets),
        read_only,
        reads_need_token,
        kept_folds,
    )
    api = console.endpoint

    async def page(request: Request) -> Response:
        # one shell for every page: its script draws the page the path names
        return FileResponse(STATIC / "page.html", media_type="text/html")

    async def openapi(request: Request) -> Response:
        return JSONResponse(document())

    async def healthz(request: Request) -> Response:
        # the process serves: what a liveness or readiness probe asks; a world that cannot be
        # reached shows as 503 on the API calls themselves, and restarting the pod would not
        # bring it back
        return PlainTextResponse("ok\n")

    routes = [
        Route("/", page),
        Route("/healthz", healthz),
        Route("/runs/{run_id}", page),
        Route("/hooks", page),
        Route("/workers", page),
        Route("/schedules", page),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/openapi.json", openapi),
        Route("/api/info", api(console.info)),
        Route("/api/runs", api(console.list_runs)),
        Route("/api/runs", api(console.start), methods=["POST"]),
        Route("/api/live", api(console.live)),
        Route("/api/runs/{run_id}", api(console.get_run)),
        Route("/api/runs/{run_id}/events", api(console.events)),
        Route("/api/runs/{run_id}/steps", api(console.steps)),
        Route("/api/runs/{run_id}/hooks", api(console.run_hooks)),
        Route("/api/runs/{run_id}/steps/{step}/result", api(console.step_result)),
        Route("/api/runs/{run_id}/hooks/{hook}/payloads", api(console.hook_payloads)),
        Route("/api/runs/{run_id}/hooks/{hook}/payloads/{n}", api(console.hook_payload)),
        Route("/api/runs/{run_id}/input", api(console.input)),
        Route("/api/runs/{run_id}/output", api(console.output)),
        Route("/api/runs/{run_id}/cancel", api(console.cancel), methods=["POST"]),
        Route("/api/runs/{run_id}/terminate", api(console.terminate), methods=["POST"]),
        Route("/api/runs/{run_id}/streams/{name}", api(console.stream)),
        Route("/api/hooks", api(console.hooks)),
        Route("/api/workers", api(console.workers)),
        Route("/api/schedules", api(console.schedules)),
        Route("/api/schedules/{name}/suspend", api(console.suspend_schedule), methods=["POST"]),
        Route("/api/schedules/{name}/resume", api(console.resume_schedule), methods=["POST"]),
        Route("/api/hooks/{token}/resume", api(console.resume_hook), methods=["POST"]),
        # a token may hold a slash: the path convertor takes it whole
        Route("/hooks/{token:path}/webhook", api(console.webhook, signed=True), methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "BAD_REQUEST")
        return error_response(
            exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}"
        )

    middleware = (
        []
        if allowed_hosts is None
        else [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    )
    app = Starlette(
        routes=routes, middleware=middleware, exception_handlers={HTTPException: http_error}
    )
    app.state.folds = console.folds
    return app


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to its caller. Uvicorn's own handlers raise the
    signal again after a clean shutdown, so the process would end killed by it rather than
    exit 0 as every other ``wayline`` command does on SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(app: Starlette) -> uvicorn.Server:
    """A uvicorn server for ``app``: ``await server.serve(sockets=[sock])`` until
    ``server.should_exit = True``. Its shutdown waits at most two seconds for open
    connections: a browser's live feed never hangs up by itself."""
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    return _Server(config)


async def serve(app: Starlette, sock: socket.socket, closing: asyncio.Event) -> None:
    """Serve ``app`` on the bound ``sock`` until SIGINT or SIGTERM; then ``closing`` (the one
    the app was made with) ends every live feed, and the server stops."""
    running = server(app)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    task = asyncio.create_task(running.serve(sockets=[sock]), name="wayline-console")
    stopping = asyncio.create_task(stop.wait(), name="wayline-console-stop")
    try:
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
        stopping.cancel()
        closing.set()
        running.should_exit = True
        await task
