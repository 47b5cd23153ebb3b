"""World contract: ``in_flight_messages`` counts a topic's messages a worker holds (delivered,
not yet acked), what keeps the operator from scaling a WorkflowWorker's version to zero in the
middle of a step."""

from __future__ import annotations

from tests.runtime.harness import wait_for
from wayline.world import Delivery, World


async def _receive(world: World, topic: str, count: int) -> list[Delivery]:
    """``count`` deliveries of ``topic``."""
    held: list[Delivery] = []
    for _ in range(10):  # a NATS pull may answer with fewer than it was asked for
        held += await world.receive(topic, max_messages=count - len(held), wait_seconds=2)
        if len(held) == count:
            break
    assert len(held) == count
    return held


async def test_in_flight_messages_counts_held_messages_by_topic(world: World) -> None:
    topic, other = "flow:w:in-flight-count@a", "flow:w:in-flight-count@b"
    for n in range(3):
        await world.enqueue(topic, {"n": n})
    await world.enqueue(other, {"n": 9})
    assert await world.in_flight_messages([topic, other, "none"]) == {
        topic: 0,
        other: 0,
        "none": 0,
    }
    held = await _receive(world, topic, 2)
    assert await world.in_flight_messages([topic, other]) == {topic: 2, other: 0}
    assert await world.ready_messages([topic]) == {topic: 1}  # held ones are not backlog
    for delivery in held:
        await world.ack(delivery)

    async def settled() -> bool:
        return await world.in_flight_messages([topic]) == {topic: 0}

    # A NATS ack is sent without waiting for the server to confirm it (``WorkQueue.ack``).
    assert await wait_for(settled, timeout=10)
    assert await world.in_flight_messages([]) == {}


async def test_a_message_handed_back_with_a_delay_is_not_in_flight(world: World) -> None:
    # A step waiting out a ten-minute retry backoff (or a slot or rate-limit wait) is held by no
    # worker: counting it in flight would keep its version's replicas up, idle, until it is due.
    topic = "flow:w:in-flight-delayed@a"
    for n in range(4):
        await world.enqueue(topic, {"n": n})
    held = await _receive(world, topic, 4)
    assert await world.retry(held[0], 600.0)
    assert await world.retry(held[1], 600.0)
    assert await world.release(held[2], 600.0)  # a slot's or a rate limit's wait
    assert await world.in_flight_messages([topic]) == {topic: 1}
    assert await world.ready_messages([topic]) == {topic: 0}
    await world.ack(held[3])

    async def settled() -> bool:
        return await world.in_flight_messages([topic]) == {topic: 0}

    assert await wait_for(settled, timeout=10)
    assert await world.ready_messages([topic]) == {topic: 0}


async def test_a_delayed_message_delivered_again_is_in_flight_again(world: World) -> None:
    topic = "flow:w:in-flight-delayed-again@a"
    await world.enqueue(topic, {"n": 1})
    first = await world.receive(topic, max_messages=1, wait_seconds=5)
    assert len(first) == 1
    assert await world.retry(first[0], 0.5)
    again: list[Delivery] = []
    for _ in range(20):  # bounded: the delay is half a second
        again += await world.receive(topic, max_messages=1, wait_seconds=1)
        if again:
            break
    assert [d.message_id for d in again] == [first[0].message_id]
    assert await world.in_flight_messages([topic]) == {topic: 1}
    await world.ack(again[0])
