"""A cleanup on JetStream racing the workers: a message of a deleted run settled by a worker
while the cleanup sweeps the queue is already gone, which the sweep takes as done."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime import start_flows as sf
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
