"""A message on a NATS fair lane survives what a message on any other subject does: its
lane's consumer deleted under a process that made it, a retry with a delay (counted delayed,
not in flight, and served again), a delayed enqueue fired onto a lane served once by one of two
processes (one of them started after the schedule was stored), a hand-back (not an attempt)
and a hold that ran out (served again to another process, once); with a priority and a
fairness key together the more urgent level goes first, and the subject before the levels gets
its turns beside a key of weight 100."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.nats_fixtures import OpenWorlds
from wayline._core import ordering
from wayline.worlds.nats.names import consumer_name, lane_of


def keyed(
    name: str, key: str, priority: int = ordering.DEFAULT_PRIORITY, weight: int = 1
) -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, weight).fields()}


def name(d: Any) -> str:
    return str((d.payload or {})["name"])


async def received(world: Any, topic: str, batch: int = 1) -> list[Any]:
    """The first deliveries of ``topic`` within 10 s (a redelivery or a delay ends first)."""
    began = time.monotonic()
    got: list[Any] = []
    while not got and time.monotonic() - began < 10:
        got = await world.receive(topic, max_messages=batch, wait_seconds=1)
    return got


async def test_a_lane_whose_consumer_was_deleted_is_served_again(
    open_nats_world: OpenWorlds,
) -> None:
    a = await open_nats_world()
    b = await open_nats_world()
    topic = "lane-faults-deleted-lane"
    await a.enqueue(topic, keyed("x0", "lane-faults-key"))
    got = await a.receive(topic, max_messages=1, wait_seconds=2)
    assert [name(d) for d in got] == ["x0"]
    assert await a.ack(got[0])
    # An ack is sent one way: x0 is gone once the consumer took it, not before (deleting the
    # consumer first would lose the ack, and x0 would be served again, as on any subject)
    for _ in range(200):
        if not (await a.in_flight_messages([topic]))[topic]:
            break
        await asyncio.sleep(0.05)
    lane = f"p5f{lane_of('lane-faults-key')}"
    await a._queue._js.delete_consumer(a._queue._names.queue_stream, consumer_name(topic, lane))
    await b.enqueue(topic, keyed("x1", "lane-faults-key"))
    seen: list[str] = []
    for _ in range(6):
        got = await a.receive(topic, max_messages=1, wait_seconds=1)
        for d in got:
            seen.append(name(d))
            assert await a.ack(d)
        if seen:
            break
    assert seen == ["x1"]


async def test_a_retry_with_a_delay_on_a_lane_is_counted_delayed_and_served_again(
    open_nats_world: OpenWorlds,
) -> None:
    w = await open_nats_world(visibility_seconds=30)
    topic = "lane-faults-nak-lane"
    await w.enqueue(topic, keyed("n0", "lane-faults-nak"))
    got = await w.receive(topic, max_messages=1, wait_seconds=2)
    assert await w.retry(got[0], 2.0)
    assert (await w.delayed_messages([topic], time.time() + 60))[topic] == 1
    assert (await w.in_flight_messages([topic]))[topic] == 0
    assert (await w.ready_messages([topic]))[topic] == 0
    again = await received(w, topic)
    assert [name(d) for d in again] == ["n0"]
    assert again[0].attempt == 2
    assert (await w.delayed_messages([topic], time.time() + 60))[topic] == 0
    assert (await w.in_flight_messages([topic]))[topic] == 1
    assert await w.ack(again[0])


async def test_a_delayed_enqueue_onto_a_lane_is_served_once_by_one_of_two_processes(
    open_nats_world: OpenWorlds,
) -> None:
    early = await open_nats_world()
    topic = "lane-faults-sched-lane"
    await early.receive(topic, max_messages=1, wait_seconds=0.1)  # subscribed before
    sender = await open_nats_world()
    await sender.enqueue(topic, keyed("s0", "lane-faults-sched", priority=3), delay_seconds=1.5)
    late = await open_nats_world()
    await late.receive(topic, max_messages=1, wait_seconds=0.1)  # subscribed after the schedule
    assert (await late.delayed_messages([topic], time.time() + 60))[topic] == 1

    async def take(world: Any) -> list[tuple[str, float]]:
        t0 = time.monotonic()
        out: list[tuple[str, float]] = []
        while time.monotonic() - t0 < 15 and not out:
            for d in await world.receive(topic, max_messages=1, wait_seconds=1):
                out.append((name(d), time.monotonic() - t0))
                assert await world.ack(d)
        return out

    got = await asyncio.gather(take(early), take(late))
    served = [n for g in got for n, _ in g]
    assert served == ["s0"]


async def test_priority_and_fairness_together_beside_the_subject_before_the_levels(
    open_nats_world: OpenWorlds,
) -> None:
    w = await open_nats_world()
    topic = "lane-faults-mix"
    for i in range(30):
        await w.enqueue(topic, keyed(f"h{i}", "lane-faults-heavy", weight=100))
    for i in range(3):
        await w.enqueue(topic, {"name": f"t{i}"})
    await w.enqueue(topic, keyed("u0", "lane-faults-urgent", priority=2))
    await w.enqueue(topic, {"name": "low", **ordering.Ordering(8, "").fields()})
    order: list[str] = []
    while True:
        got = await w.receive(topic, max_messages=4, wait_seconds=0.5)
        if not got:
            break
        for d in got:
            order.append(name(d))
            assert await w.ack(d)
    assert order[0] == "u0"
    assert sorted(order) == sorted([f"h{i}" for i in range(30)] + ["t0", "t1", "t2", "u0", "low"])
    # a key of weight 100 takes 100 turns to the subject before the levels' one: t0 comes in
    # the first batch, t1 and t2 once the key's 30 are served, "low" (priority 8) last
    assert order[:6].count("t0") == 1
    assert order[-3:] == ["t1", "t2", "low"]


async def test_a_lane_message_handed_back_or_left_to_expire_is_served_once_again(
    open_nats_world: OpenWorlds,
) -> None:
    a = await open_nats_world(visibility_seconds=2)
    b = await open_nats_world(visibility_seconds=2)
    topic = "lane-faults-depths"
    await a.enqueue(topic, keyed("d0", "lane-faults-d", priority=4))
    await a.enqueue(topic, keyed("d1", "lane-faults-e"))
    depths = {d.topic: d.ready for d in (await a.queue_depths()) or []}
    assert depths.get(topic) == 2
    got = await a.receive(topic, max_messages=2, wait_seconds=2)
    assert sorted(name(d) for d in got) == ["d0", "d1"]
    by = {name(d): d for d in got}
    assert await a.release(by["d0"], 0.0)
    again = await b.receive(topic, max_messages=2, wait_seconds=3)
    assert [name(d) for d in again] == ["d0"]
    assert again[0].attempt == 1  # a hand-back is not an attempt
    assert await b.ack(again[0])
    # d1 is never renewed: it comes back after the visibility, to b, once
    back = await received(b, topic, 2)
    assert [name(d) for d in back] == ["d1"]
    assert back[0].attempt == 2
    assert await a.ack(by["d1"]) is False
    assert await b.ack(back[0])
    assert await a.receive(topic, max_messages=2, wait_seconds=0.5) == []
