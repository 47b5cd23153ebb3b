"""Attacks on the lane choice of keyed work on a real nats-server (issue #38): a lane read that
times out under a burst, fairness keys with odd characters, and two senders choosing for one
new key at once."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.nats.test_keys_sharing_a_lane import keyed, lanes_of
from tests.nats_fixtures import OpenWorlds, taken_names
from wayline.worlds.nats.names import FAIR_LANES, lane_of


async def test_a_burst_meeting_a_lane_read_that_times_out_reads_once(
    open_nats_world: OpenWorlds,
) -> None:
    """With direct gets unanswered (the stream's ``allow_direct`` off), a lane read waits out
    the request timeout. The sends of a burst that waited for that read go to their home lanes
    with it, instead of each reading the eight lanes again in turn (one timeout a send)."""
    world = await open_nats_world(request_timeout=0.3)
    queue = world._queue
    topic = "lane-read-times-out"
    reads: list[str] = []
    first = queue._lanes._first

    async def counted(topic: str, kind: str) -> Any:
        reads.append(kind)
        return await first(topic, kind)

    queue._lanes._first = counted
    config = (await queue._js.stream_info(queue._stream)).config
    config.allow_direct = False
    await queue._js.update_stream(config)
    try:
        keys = [f"timeout-key-{i}" for i in range(12)]
        await asyncio.gather(*(world.enqueue(topic, keyed(k, k)) for k in keys))
    finally:
        config.allow_direct = True
        await queue._js.update_stream(config)
    assert len(reads) == FAIR_LANES, f"{len(reads)} lane reads for one burst"
    assert await lanes_of(world, topic) == {k: {f"p5f{lane_of(k)}"} for k in keys}
    got = await taken_names(world, topic, len(keys), batch=12)
    assert sorted(got) == sorted(keys)
