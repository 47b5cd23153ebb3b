"""Starts with run ids while the world's nats-server restarts (SIGTERM) or crashes (SIGKILL):
a start that raised is repeated with its id until it answers; then every run ends once, with
the input of its first start, and every step body ran once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

import wayline
from tests.nats_fixtures import NatsServer, OpenWorlds, wait_reconnected
from tests.runtime import start_flows as sf
from tests.runtime.harness import settings

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
async def test_starts_across_a_server_restart_each_run_once(
    nats_server_own: NatsServer, open_own_world: OpenWorlds, tmp_path: Path, kill: bool
) -> None:
    path = str(tmp_path / "m")
    clients = [wayline.Client(await open_own_world(visibility_seconds=3)) for _ in range(3)]
    worker_world = await open_own_world(visibility_seconds=3)
    ids = [f"wf_{uuid.uuid4().hex}" for _ in range(60)]
    failures: Counter[str] = Counter()
    spans: list[tuple[float, float]] = []

    async def start(n: int, run_id: str) -> wayline.RunHandle[str]:
        client = clients[n % len(clients)]
        await asyncio.sleep(n * 0.04)
        deadline = time.monotonic() + 30
        while True:
            try:
                began = time.monotonic()
                handle = await client.start_with(
                    wayline.StartOptions(run_id=run_id), sf.st_counted, path, run_id
                )
                spans.append((began, time.monotonic()))
                return handle
            except wayline.WaylineError as err:
                failures[type(err).__name__] += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async with wayline.Worker(worker_world, sf.WORKFLOWS, settings=settings()):
        starting = asyncio.gather(*(start(n, i) for n, i in enumerate(ids)))
        await asyncio.sleep(0.4)
        down = time.monotonic()
        await asyncio.to_thread(nats_server_own.kill if kill else nats_server_own.stop)
        await asyncio.sleep(1.5)  # starts meet a server that is gone
        await asyncio.to_thread(nats_server_own.start)
        up = time.monotonic()
        handles = await starting
        await wait_reconnected(worker_world, *(c.world for c in clients))
        results = await asyncio.gather(*(h.result(timeout=60) for h in handles))
    assert results == ids
    assert Counter(sf.lines(path)) == Counter(f"body {i}" for i in ids), failures
    listed = await clients[0].list_runs(limit=1000)
    assert sorted(r.run_id for r in listed) == sorted(ids)
    across = sum(1 for b, e in spans if b < up and e > down)
    assert across > 0, "no start met the outage"
