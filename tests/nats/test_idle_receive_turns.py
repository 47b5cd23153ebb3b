"""An idle receive of the NATS world on a topic that stores nothing waits for a publish it
hears or for its next rescan, not in turns of a quarter of a second (issue #39's idle target):
each turn asked the server nothing and only woke the process. Counted, not timed: the waits
of one receive."""

from __future__ import annotations

import asyncio

import pytest

from tests.nats_fixtures import OpenWorlds, count_level_waits
from wayline.worlds.nats import queue as nats_queue


async def test_an_idle_receive_on_a_topic_that_stores_nothing_waits_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    waits = count_level_waits(monkeypatch)
    assert await world.receive("idle-turns-empty", max_messages=1, wait_seconds=1.5) == []
    # one wait to the receive's end (the first rescan, made at the receive's start, is 2 s
    # away); turns of 0.25 s made six
    assert len(waits) == 1, waits
    await world.enqueue("idle-turns-empty", {"n": 1})
    [got] = await world.receive("idle-turns-empty", max_messages=1, wait_seconds=1.5)
    assert got.payload == {"n": 1}
    assert await world.ack(got)


async def test_a_lost_connection_ends_a_long_idle_receive_at_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The longer wait is cut short as the turns were: a receive waiting on a topic that stores
    nothing ends when its connection is lost, not at its wait's end (30 s here, with rescans
    as far apart), so the worker's next receive waits for the reconnection."""
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 30.0)
    world = await open_nats_world()
    waits = count_level_waits(monkeypatch)
    receive = asyncio.ensure_future(
        world.receive("idle-turns-lost", max_messages=1, wait_seconds=30.0)
    )
    while not waits:  # noqa: ASYNC110 - the wait's start sets no event of its own
        await asyncio.sleep(0.01)
    world._queue.lost_connection()
    assert await asyncio.wait_for(receive, 10.0) == []
    assert len(waits) == 1 and waits[0] > 10.0, waits
