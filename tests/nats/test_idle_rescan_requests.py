"""What an idle worker's receive asks the server, counted by a subscriber on the real server's
JetStream API (not timed): each rescan of a queue with nothing stored under the topic is one
request, whatever the topic's levels and lanes, so a world of three partitions costs three
requests a rescan where one partition costs one (docs/nats.md, "Partitions")."""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer, OpenWorlds
from wayline._core import ordering
from wayline.worlds.nats import queue as nats_queue
from wayline.worlds.nats.levels import LANE_SCAN_EVERY

RESCANS = 3
"""Rescans each partition's queue makes before the count ends: the first full scan and a
few more."""


async def _idle_requests(
    open_nats_world: OpenWorlds,
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
) -> tuple[int, int]:
    """The JetStream API requests on the queue streams, and the rescans, of an idle receive
    loop on a fresh world of ``partitions`` partitions whose other topic holds work."""
    import nats

    prefix = "ir" + uuid.uuid4().hex[:10]
    world = await open_nats_world(prefix=prefix, partitions=partitions)
    # Work on another topic is not this topic's: it must not make the rescan ask more.
    await world.enqueue("idle-rescan-other", {"runId": "elsewhere", "name": "other"})
    scans: collections.Counter[int] = collections.Counter()
    scan = nats_queue.Queue._scan

    async def counted(self: Any, topic: str, levels: Any) -> None:
        scans[id(self)] += 1
        await scan(self, topic, levels)

    monkeypatch.setattr(nats_queue.Queue, "_scan", counted)
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 0.05)  # a few rescans in a short test
    requests: list[str] = []
    nc = await nats.connect(nats_server.url)
    try:

        async def seen(msg: Any) -> None:
            if f".{prefix}_queue" in msg.subject:
                requests.append(msg.subject)

        await nc.subscribe("$JS.API.>", cb=seen)
        await nc.flush()
        for _ in range(200):  # bounded: each receive waits 0.1 s at most
            if len(scans) == partitions and min(scans.values()) >= RESCANS:
                break
            assert await world.receive("idle-rescan-topic", wait_seconds=0.1) == []
        # The server copies a request to this subscriber as it takes it, which may be after
        # its reply reached the world: wait (bounded) for the copies of the requests made.
        for _ in range(100):
            if len(requests) >= sum(scans.values()):
                break
            await asyncio.sleep(0.02)
        await nc.flush()
    finally:
        await nc.close()
    assert len(scans) == partitions and min(scans.values()) >= RESCANS
    return len(requests), sum(scans.values())


@pytest.mark.parametrize("partitions", [1, 3])
async def test_an_idle_receive_asks_one_request_a_rescan_of_each_queue(
    open_nats_world: OpenWorlds,
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
) -> None:
    """Each rescan of an idle queue asks one direct get over every subject of the topic, so
    the requests are the rescans: not twelve a rescan (a direct get per plain level and one
    for the schedules), nor ninety-two every fourth (the fair lanes too), per partition."""
    requests, scans = await _idle_requests(open_nats_world, nats_server, monkeypatch, partitions)
    # At most one a rescan; the subscriber's copy of a request is seldom missed (one in about
    # ten runs on a loaded machine), so an exact count would be flaky.
    assert 0 < requests <= scans


async def test_a_lane_message_no_publish_told_of_is_found_by_the_next_rescan(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyed message on a fair lane, stored while this process heard nothing of the topic
    (a partition cut its publishes off), is found by the first rescan after it: the question
    that finds the idle topic holding something names the subject of its first message, so the
    lane is known though that scan is not one that asks every lane."""
    world = await open_nats_world()
    topic = "idle-rescan-lane"
    await world.enqueue(topic, {"name": "heard"})
    [first] = await world.receive(topic, wait_seconds=2)
    assert await world.ack(first) is True
    scans: list[str] = []
    scan = nats_queue.Queue._scan

    async def counted(self: Any, asked: str, levels: Any) -> None:
        scans.append(asked)
        await scan(self, asked, levels)

    monkeypatch.setattr(nats_queue.Queue, "_scan", counted)
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 0.05)
    levels = world._queue._levels[topic]
    # Just past a scan that asked the lanes (``levels.scans`` counts the scans that asked each
    # subject): the next three scans that do would not ask them.
    while not scans or levels.scans % LANE_SCAN_EVERY != 1:
        assert await world.receive(topic, wait_seconds=0.1) == []
    await levels.sub.unsubscribe()  # the record stops hearing the topic's publishes
    keyed = ordering.Ordering(priority=2, fairness_key="tenant-idle-rescan").fields()
    await world.enqueue(topic, {"name": "unheard", **keyed})
    before = len(scans)
    names: list[str] = []
    while not names and len(scans) < before + 2:
        got = await world.receive(topic, wait_seconds=0.1)
        names += [str((d.payload or {})["name"]) for d in got]
        for delivery in got:
            assert await world.ack(delivery) is True
    assert names == ["unheard"]
