"""World contract: ``in_flight_messages`` counts a topic's messages a worker holds (delivered,
not yet acked), what keeps the operator from scaling a WorkflowWorker's version to zero in the
middle of a step."""

from __future__ import annotations

from tests.runtime.harness import wait_for
from wayline.world import Delivery, World


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
    held: list[Delivery] = []
    for _ in range(10):  # a NATS pull may answer with fewer than it was asked for
        held += await world.receive(topic, max_messages=2 - len(held), wait_seconds=2)
        if len(held) == 2:
            break
    assert len(held) == 2
    assert await world.in_flight_messages([topic, other]) == {topic: 2, other: 0}
    assert await world.ready_messages([topic]) == {topic: 1}  # held ones are not backlog
    for delivery in held:
        await world.ack(delivery)

    async def settled() -> bool:
        return await world.in_flight_messages([topic]) == {topic: 0}

    # A NATS ack is sent without waiting for the server to confirm it (``WorkQueue.ack``).
    assert await wait_for(settled, timeout=10)
    assert await world.in_flight_messages([]) == {}
