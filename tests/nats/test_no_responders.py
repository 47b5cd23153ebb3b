"""JetStream's "no responders" (503: a stream without a leader, as during an election) is an
unavailable world, which callers retry, never a permanent error. A caller holding a delivery
has its write asked again by the world for as long as its hold lasts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldUnavailableError
from wayline.world import patience
from wayline.worlds.nats.provision import provision


async def test_no_responders_is_world_unavailable(open_nats_world: OpenWorlds) -> None:
    import nats

    world = await open_nats_world()
    nc = await nats.connect(world._options.servers, connect_timeout=2)
    try:
        js = nc.jetstream()
        # with its stream gone, a subject answers exactly as one whose leader is being elected
        for stream in (world.names.queue_stream, world.names.events_stream):
            await js.delete_stream(stream)
        await js.delete_key_value(world.names.hooks_bucket)
    finally:
        await nc.close()
    with pytest.raises(WorldUnavailableError):
        await world.enqueue("flow", {"runId": "x"})
    with pytest.raises(WorldUnavailableError):
        await world.enqueue("flow", {"runId": "x"}, delay_seconds=5)
    with pytest.raises(WorldUnavailableError):
        await world.append(new_run_id(), [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})])
    with pytest.raises(WorldUnavailableError):
        await world.get_run(new_run_id())
    with pytest.raises(WorldUnavailableError):
        await world.get_hook("some-token")


async def _without_event_log(world: Any) -> Any:
    """A nats-py connection to ``world``'s server, with the world's event log stream deleted:
    every append is answered "no responders", as while the stream elects a leader."""
    import nats

    nc = await nats.connect(world._options.servers, connect_timeout=2)
    await nc.jetstream().delete_stream(world.names.events_stream)
    return nc


def _held_append(world: Any, run_id: str, seconds: float) -> asyncio.Task[Any]:
    """An append made by a task that holds a delivery for ``seconds`` more."""
    until = time.monotonic() + seconds

    async def append() -> Any:
        patience.hold_until(lambda: until)
        return await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data={"w": 1})])

    return asyncio.create_task(append())


async def test_a_holder_asks_an_append_again_until_the_stream_answers(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    nc = await _without_event_log(world)
    try:
        run_id = new_run_id()
        append = _held_append(world, run_id, 20.0)
        await asyncio.sleep(1.0)  # well past the attempts of a caller that holds nothing
        assert not append.done()
        await provision(
            nc.jetstream(), world.names, replicas=1, storage="file", url=world._options.servers[0]
        )
        [created] = await asyncio.wait_for(append, 15)
    finally:
        await nc.close()
    assert [e.type for e in await world.list_events(run_id)] == [EventType.RUN_CREATED]
    assert created.seq == 1


async def test_a_holder_stops_asking_before_its_hold_ends(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    nc = await _without_event_log(world)
    try:
        append = _held_append(world, new_run_id(), 1.5)
        with pytest.raises(WorldUnavailableError):
            await asyncio.wait_for(append, 10)
    finally:
        await nc.close()
