"""World contract: ``delayed_messages`` counts a topic's messages that wait out a delay (a
delayed enqueue, a retry's backoff, a hand-back's wait) and fall due by a given time: what the
operator brings a WorkflowWorker's version up for just before a wave of sleeping runs is due."""

from __future__ import annotations

from tests.contract.test_in_flight_messages import _receive
from wayline.world import World


async def test_delayed_messages_count_those_due_by_the_time_asked(world: World) -> None:
    topic, other = "flow:w:delayed-count@a", "flow:w:delayed-count@b"
    now = world.now()
    for _ in range(2):
        await world.enqueue(topic, {"soon": True}, delay_seconds=300)
    await world.enqueue(topic, {"late": True}, delay_seconds=3000)
    await world.enqueue(topic, {"ready": True})
    await world.enqueue(other, {"soon": True}, delay_seconds=300)
    assert await world.delayed_messages([topic, other, "none"], now + 600) == {
        topic: 2,
        other: 1,
        "none": 0,
    }
    assert await world.delayed_messages([topic], now + 6000) == {topic: 3}
    assert await world.delayed_messages([topic], now + 60) == {topic: 0}
    # neither the ready message nor a held one waits out a delay
    assert await world.ready_messages([topic]) == {topic: 1}
    await _receive(world, topic, 1)
    assert await world.delayed_messages([topic], now + 6000) == {topic: 3}
    assert await world.delayed_messages([], now + 6000) == {}


async def test_a_message_handed_back_with_a_delay_counts_until_it_is_due(world: World) -> None:
    topic = "flow:w:delayed-handed-back@a"
    for n in range(3):
        await world.enqueue(topic, {"n": n})
    held = await _receive(world, topic, 3)
    now = world.now()
    assert await world.retry(held[0], 300.0)  # a retry's backoff
    assert await world.release(held[1], 3000.0)  # a slot's or a rate limit's wait
    assert await world.delayed_messages([topic], now + 600) == {topic: 1}
    assert await world.delayed_messages([topic], now + 6000) == {topic: 2}
    assert await world.in_flight_messages([topic]) == {topic: 1}  # the third, still held
    await world.ack(held[2])
