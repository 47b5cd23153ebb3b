"""A cleanup on JetStream racing workers and starts: a message of a deleted run settled by a
worker while the cleanup sweeps the queue is already gone, which the sweep takes as done; a
hook token claimed by a new run under the deleted run's id is the new run's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime import flows
from tests.runtime import start_flows as sf
from tests.runtime.harness import wait_for
from wayline._core.ids import new_run_id
from wayline.worlds.nats.queue import Queue


async def test_a_message_acked_while_the_cleanup_sweeps_is_no_error(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    run_id = new_run_id()
    await client.start(sf.st_counted, str(tmp_path / "m"), "t", run_id=run_id)
    assert await client.terminate(run_id)  # ended, its start message still queued
    topic = await world.router.topic("flow", {"runId": run_id})
    [held] = await world.receive(topic, wait_seconds=2)  # a worker holds it
    listed = Queue.stored

    async def acked_meanwhile(self: Queue) -> AsyncIterator[Any]:
        found = [item async for item in listed(self)]
        assert await world.ack(held)  # the worker settles it after the sweep listed it
        for item in found:
            yield item

    monkeypatch.setattr(Queue, "stored", acked_meanwhile)
    assert await world.delete_runs(older_than=0) == 1
    assert await world.get_run(run_id) is None


async def test_a_hook_claimed_by_a_run_started_again_during_its_cleanup_is_kept(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run waiting on hook ``token`` ends; a cleanup deletes it and, after purging its log,
    drops the hook tokens it held. Its id is started again in between and the new run waits
    on the same token: the new run's claim is not the deleted run's and stays, so the hook
    can be resumed (dropped, the token was unknown and the run waited for good)."""
    from wayline.worlds.nats.eventlog import EventLog

    world, janitor = await open_nats_world(), await open_nats_world()
    client = wayline.Client(world)
    run_id, token = new_run_id(), f"tok-{new_run_id()}"
    async with wayline.Worker(world, [flows.kid_waits]):
        first = await client.start(flows.kid_waits, token, run_id=run_id)
        await wait_for(lambda: world.get_hook(token))
        await client.resume_hook(token, "old")
        assert await first.result(timeout=10) == "old"
        purged, go_on = asyncio.Event(), asyncio.Event()
        drop = EventLog._drop_token

        async def paused(self: EventLog, *args: Any) -> None:
            purged.set()
            await go_on.wait()
            await drop(self, *args)

        monkeypatch.setattr(EventLog, "_drop_token", paused)
        cleanup = asyncio.ensure_future(janitor.delete_runs(older_than=0))
        await asyncio.wait_for(purged.wait(), 10)
        again = await client.start(flows.kid_waits, token, run_id=run_id)
        assert again._fresh

        async def claimed() -> bool:
            hook = await world.get_hook(token)
            return hook is not None and hook.active

        await wait_for(claimed)
        go_on.set()
        assert await cleanup == 1
        await client.resume_hook(token, "new")
        assert await again.result(timeout=10) == "new"
