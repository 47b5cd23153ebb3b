"""The worker's probe endpoints (``wayline.health``): ``/healthz`` while the worker has not
failed, ``/readyz`` only while it consumes and its world answers; on both worlds (the CLI's
``wayline worker --health-port``: tests/cli/test_worker_health.py)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from typing import Any

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline.health import HealthServer


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as got:
            return got.status, got.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


async def get(port: int, path: str) -> tuple[int, str]:
    return await asyncio.to_thread(_get, port, path)


async def test_ready_only_while_the_worker_consumes(engine: Any) -> None:
    worker = wayline.Worker(engine.world, [flows.chain], settings=settings())
    async with HealthServer(worker) as health:
        assert await get(health.port, "/healthz") == (200, "ok\n")
        code, text = await get(health.port, "/readyz")
        assert code == 503 and "not consuming" in text  # not started yet
        await worker.start()
        assert await get(health.port, "/readyz") == (200, "ok\n")
        assert (await get(health.port, "/nope"))[0] == 404
        await worker.close()
        code, text = await get(health.port, "/readyz")
        assert code == 503 and "not consuming" in text
        worker.failure = RuntimeError("boom")
        code, text = await get(health.port, "/healthz")
        assert code == 503 and "boom" in text


async def test_not_ready_while_the_nats_server_is_down(
    nats_server_own: Any, nats_own_world_factory: Any
) -> None:
    world = await nats_own_world_factory()
    await world.start()
    server = nats_server_own
    worker = wayline.Worker(world, [flows.chain], settings=settings())
    try:
        async with worker, HealthServer(worker, probe_timeout=1.0) as health:
            assert (await get(health.port, "/readyz"))[0] == 200
            server.stop()

            async def unready() -> bool:
                return (await get(health.port, "/readyz"))[0] == 503

            await wait_for(unready, timeout=20, interval=0.2)
            assert (await get(health.port, "/healthz"))[0] == 200  # alive: no restart needed
            server.start()

            async def ready() -> bool:
                return (await get(health.port, "/readyz"))[0] == 200

            await wait_for(ready, timeout=30, interval=0.2)
    finally:
        await world.close()
