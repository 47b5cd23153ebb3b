"""JetStream's "no responders" (503: a stream without a leader, as during an election) is an
unavailable world, which callers retry, never a permanent error."""

from __future__ import annotations

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldUnavailableError


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
