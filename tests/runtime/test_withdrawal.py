"""A worker closed gracefully withdraws its registry entries at once, so a run it served says
it waits for a worker (``registry.waiting_for_worker``) instead of looking served for three
more heartbeats. Checked on every world, against what the world stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings
from wayline.errors import WorldUnavailableError


async def _live_workers(engine: Engine, workflow: str) -> set[str]:
    """The workers the stored entries of ``workflow`` list as live now."""
    now = engine.world.now()
    live: set[str] = set()
    for e in await engine.world.list_served():
        if e.get("workflow") != workflow:
            continue
        workers = e.get("workers") or {}
        live |= {w for w, until in workers.items() if float(until) >= now}
        if float(e.get("liveUntil", 0)) >= now:
            live.add(str(e.get("worker")))
    return live


async def test_a_heartbeat_under_way_at_the_close_lands_before_the_withdrawal(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat whose write is in flight when the close comes (its cancel lost, as a world
    call that completes as the cancel lands loses it) is held until the withdrawal has been
    asked for, and only then written. The withdrawal waits for it (``Worker._withdraw``), so
    the heartbeat lands first and the closed worker is listed as live by no entry."""
    worker = wayline.Worker(
        engine.world, [flows.chain], settings=settings(), heartbeat_seconds=0.05
    )
    record = engine.world.record_served
    beat_held = asyncio.Event()
    withdrawal_asked = asyncio.Event()
    order: list[str] = []

    async def recording(entries: Any) -> None:
        if any(e.get("withdrawn") for e in entries):
            withdrawal_asked.set()
            await record(entries)
            order.append("withdrawal")
            return
        task = asyncio.current_task()
        if task is None or task.get_name() != "wayline-heartbeat" or beat_held.is_set():
            await record(entries)
            return
        beat_held.set()
        # The write is under way: a cancel that reaches it now is lost, and it lands later.
        done = asyncio.ensure_future(asyncio.wait_for(withdrawal_asked.wait(), 3.0))
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                continue
            except TimeoutError:
                break
        await record(entries)
        order.append("heartbeat")

    monkeypatch.setattr(engine.world, "record_served", recording)
    await worker.start()
    await asyncio.wait_for(beat_held.wait(), 10)
    await worker.close()
    assert order == ["heartbeat", "withdrawal"]
    assert worker.worker_id not in await _live_workers(engine, flows.chain.name)


async def test_a_withdrawal_the_world_refuses_once_is_written_on_a_second_try(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A withdrawal whose write fails once (a request that timed out on a loaded server) left
    the entry live for three heartbeats (30 s by default): a rolling upgrade's old runs said
    nothing about the worker they wait for. It is tried again within the shutdown grace."""
    worker = wayline.Worker(engine.world, [flows.chain], settings=settings())
    record = engine.world.record_served
    refused: list[int] = []

    async def refusing_once(entries: Any) -> None:
        if any(e.get("withdrawn") for e in entries) and not refused:
            refused.append(1)
            raise WorldUnavailableError("the registry did not answer in time")
        await record(entries)

    monkeypatch.setattr(engine.world, "record_served", refusing_once)
    await worker.start()
    assert worker.worker_id in await _live_workers(engine, flows.chain.name)
    await worker.close()
    assert refused == [1]
    assert worker.worker_id not in await _live_workers(engine, flows.chain.name)
