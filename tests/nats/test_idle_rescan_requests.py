"""What an idle worker's receive asks the server, counted by a subscriber on the real server's
JetStream API (not timed): each rescan of a queue with nothing stored under the topic is one
request, whatever the topic's levels and lanes, and the rescans of every topic a process serves
on a queue stream share that request, so a worker costs one request a queue stream and rescan
whatever its topics: three a rescan at three partitions, one at one (docs/nats.md,
"Partitions")."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer, OpenWorlds
from wayline._core import ordering
from wayline.worlds.nats import queue as nats_queue
from wayline.worlds.nats.levels import LANE_SCAN_EVERY

RESCANS = 3
"""Rescans each partition's queue makes before the count ends: the first full scan and a
few more."""

TOPICS = 6
"""The topics one idle worker process serves at once in the test of many topics."""


@contextlib.asynccontextmanager
async def _counted(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch, prefix: str, rescan: float
) -> AsyncIterator[tuple[collections.Counter[tuple[int, str]], list[str], Any]]:
    """The scans of each queue and topic (``Queue._scan``, due every ``rescan`` seconds), and
    the JetStream API requests on the queue streams of the world of ``prefix``, as the real
    server copies them to a subscriber (given too, to flush)."""
    import nats

    scans: collections.Counter[tuple[int, str]] = collections.Counter()
    scan = nats_queue.Queue._scan

    async def counted(self: Any, topic: str, levels: Any) -> None:
        scans[id(self), topic] += 1
        await scan(self, topic, levels)

    monkeypatch.setattr(nats_queue.Queue, "_scan", counted)
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", rescan)  # a few rescans in a short test
    requests: list[str] = []
    nc = await nats.connect(nats_server.url)
    try:

        async def seen(msg: Any) -> None:
            if f".{prefix}_queue" in msg.subject:
                requests.append(msg.subject)

        await nc.subscribe("$JS.API.>", cb=seen)
        await nc.flush()
        yield scans, requests, nc
    finally:
        await nc.close()


async def _idle_requests(
    open_nats_world: OpenWorlds,
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
) -> tuple[int, int]:
    """The JetStream API requests on the queue streams, and the rescans, of an idle receive
    loop on a fresh world of ``partitions`` partitions whose other topic holds work."""
    prefix = "ir" + uuid.uuid4().hex[:10]
    world = await open_nats_world(prefix=prefix, partitions=partitions)
    # Work on another topic is not this topic's: it must not make the rescan ask more.
    await world.enqueue("idle-rescan-other", {"runId": "elsewhere", "name": "other"})
    async with _counted(nats_server, monkeypatch, prefix, 0.05) as (scans, requests, nc):
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
    assert len(scans) == partitions and min(scans.values()) >= RESCANS
    return len(requests), sum(scans.values())


@pytest.mark.parametrize("partitions", [1, 3])
async def test_an_idle_receive_asks_one_request_a_rescan_of_each_queue(
    open_nats_world: OpenWorlds,
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
) -> None:
    """Each rescan of an idle queue asks one direct get over every subject of the topics the
    process serves on it (here one), so the requests are at most the rescans: not twelve a
    rescan (a direct get per plain level and one for the schedules), nor ninety-two every
    fourth (the fair lanes too), per partition."""
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


@pytest.mark.parametrize("partitions", [1, 3])
async def test_an_idle_worker_of_many_topics_asks_one_request_a_rescan_of_each_queue(
    open_nats_world: OpenWorlds,
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
) -> None:
    """An idle worker receiving on six topics at once (one receive loop a topic, as a worker
    runs them) asks each queue stream one direct get a rescan over the subjects of all six,
    not one a topic: the requests are bounded by the queue streams times the rescans of a
    topic, where one request a topic and rescan made six times as many. Another topic's
    work, which the worker does not serve, is not found by that question."""
    prefix = "im" + uuid.uuid4().hex[:10]
    world = await open_nats_world(prefix=prefix, partitions=partitions)
    await world.enqueue("idle-many-other", {"runId": "elsewhere", "name": "other"})
    topics = [f"idle-many-{i}" for i in range(TOPICS)]
    async with _counted(nats_server, monkeypatch, prefix, 0.2) as (scans, requests, nc):

        def enough(least: int) -> bool:
            return len(scans) == partitions * TOPICS and min(scans.values()) >= least

        async def loop(topic: str, least: int) -> None:
            for _ in range(100):  # bounded: each receive waits 0.1 s at most
                if enough(least):
                    return
                assert await world.receive(topic, wait_seconds=0.1) == []

        # Each topic's first scan asks on its own when its record began after the question
        # then on its way was sent: counted apart, as what a worker pays once, at its start.
        await asyncio.gather(*(loop(topic, 1) for topic in topics))
        await nc.flush()
        await asyncio.sleep(0.1)  # the server's copies of those first requests
        first, mark = len(requests), dict(scans)
        await asyncio.gather(*(loop(topic, 1 + RESCANS) for topic in topics))
        rescans = max(n - mark[pair] for pair, n in scans.items())
        for _ in range(50):  # the server's copies of the requests made, as in the test above
            if len(requests) - first >= partitions * rescans:
                break
            await asyncio.sleep(0.02)
        await nc.flush()
    assert enough(1 + RESCANS), scans
    asked = len(requests) - first
    # One question a queue stream and rescan, shared by the six topics; one more a stream for a
    # question on its way when the count began.
    assert 0 < asked <= partitions * (rescans + 1), (asked, rescans, sum(scans.values()))


@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_message_no_publish_told_of_is_found_beside_another_idle_topic(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """Two topics served at once share each queue stream's question: a message stored on one
    of them while this process heard nothing of it (a partition cut its publishes off) is
    found by the shared question of a later rescan, on every partition, while the other
    topic's rescans keep answering for it too."""
    world = await open_nats_world(partitions=partitions)
    heard, cut = "idle-pair-heard", "idle-pair-cut"
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 0.2)
    for topic in (heard, cut):  # every partition's queue records both topics
        assert await world.receive(topic, wait_seconds=0.1) == []
    for queue in world._queues:
        await queue._levels[cut].sub.unsubscribe()
    stop = asyncio.Event()

    async def other() -> None:  # the other topic's receive loop, idle throughout
        while not stop.is_set():
            assert await world.receive(heard, wait_seconds=0.1) == []

    loop = asyncio.create_task(other())
    try:
        await asyncio.sleep(0.3)  # the other topic's rescans have asked since
        await world.enqueue(cut, {"name": "unheard", **ordering.Ordering(priority=4).fields()})
        names: list[str] = []
        for _ in range(100):  # bounded: each receive waits 0.1 s at most
            got = await world.receive(cut, wait_seconds=0.1)
            names += [str((d.payload or {})["name"]) for d in got]
            for delivery in got:
                assert await world.ack(delivery) is True
            if names:
                break
    finally:
        stop.set()
        await loop
    assert names == ["unheard"]
