"""A worker's health endpoints for Kubernetes probes: ``wayline worker --health-port N``.

- ``GET /healthz`` (liveness): 200 while the worker has not failed; the answer itself shows
  the event loop is responsive. 503 once ``Worker.failure`` is set.
- ``GET /readyz`` (readiness): 200 when the worker is consuming (started, not stopping, its
  flow and step consumers running) and the world answers a read within ``probe_timeout``
  seconds: connected to the world and consuming. 503 with the reason otherwise.

A few lines of HTTP/1.0 on ``asyncio.start_server``: one request per connection, no body, no
keep-alive, which is all a kubelet probe sends. Bind to 127.0.0.1 (the default) or, in a pod,
to the pod's IP (the chart passes it from the downward API).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from .errors import WaylineError
from .world import World

log = logging.getLogger("wayline.health")

#: The run id the readiness probe reads: it never exists, so the read is a plain round trip.
PROBE_RUN_ID = "wayline-readiness-probe"


class Probed(Protocol):
    """What the endpoints look at (``wayline.Worker`` has it)."""

    world: World
    failure: BaseException | None

    def consuming(self) -> bool: ...


class HealthServer:
    def __init__(
        self, worker: Probed, *, host: str = "127.0.0.1", port: int = 0, probe_timeout: float = 2.0
    ) -> None:
        self.worker = worker
        self.host = host
        self.requested_port = port
        self.probe_timeout = probe_timeout
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        assert self._server is not None, "not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def liveness(self) -> tuple[int, str]:
        if self.worker.failure is not None:
            return 503, f"worker failed: {self.worker.failure}"
        return 200, "ok"

    async def readiness(self) -> tuple[int, str]:
        if not self.worker.consuming():
            return 503, "not consuming (starting, stopping or failed)"
        try:
            await asyncio.wait_for(
                self.worker.world.get_run(PROBE_RUN_ID), timeout=self.probe_timeout
            )
        except TimeoutError:
            return 503, f"world did not answer within {self.probe_timeout:g}s"
        except WaylineError as err:
            return 503, f"world unavailable: {err}"
        return 200, "ok"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5.0)
            while (await asyncio.wait_for(reader.readline(), timeout=5.0)) not in (b"\r\n", b""):
                pass  # headers: nothing in them matters here
            parts = request.decode("latin-1").split()
            method, path = (parts[0], parts[1].split("?", 1)[0]) if len(parts) >= 2 else ("", "")
            if method not in ("GET", "HEAD"):
                status, text = 405, "method not allowed"
            elif path == "/healthz":
                status, text = await self.liveness()
            elif path == "/readyz":
                status, text = await self.readiness()
            else:
                status, text = 404, "not found"
            body = b"" if method == "HEAD" else (text + "\n").encode()
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(
                status, "Service Unavailable"
            )
            writer.write(
                f"HTTP/1.0 {status} {reason}\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {len(text) + 1}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError) as err:
            log.debug("health request dropped: %r", err)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
