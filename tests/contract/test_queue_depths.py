"""World contract: the queue's depth per topic, which the console shows as queue lag. Ready
messages are counted; a delayed message and one a worker holds are not."""

from __future__ import annotations

import time

from wayline.world import QueueDepth, World


async def _depths(world: World) -> dict[str, QueueDepth]:
    found = await world.queue_depths()
    assert found is not None, "every world that ships tells its queue's depth"
    return {d.topic: d for d in found if d.topic.startswith("depth:")}


async def test_ready_messages_are_counted_per_topic_with_the_oldest(world: World) -> None:
    before = time.time()
    await world.enqueue("depth:a", {"n": 1})
    await world.enqueue("depth:a", {"n": 2})
    await world.enqueue("depth:b", {"n": 3})
    await world.enqueue("depth:b", {"n": 4}, delay_seconds=600)  # delayed: not ready yet
    depths = await _depths(world)
    assert {t: d.ready for t, d in depths.items()} == {"depth:a": 2, "depth:b": 1}
    # a bound, not a timing: the stamp is the store's, whose clock may be a little apart
    assert before - 5 <= depths["depth:a"].oldest_ready_at <= time.time() + 5

    [held] = await world.receive("depth:a", wait_seconds=2)
    assert {t: d.ready for t, d in (await _depths(world)).items()} == {
        "depth:a": 1,
        "depth:b": 1,
    }
    await world.ack(held)
    for topic in ("depth:a", "depth:b"):
        [d] = await world.receive(topic, wait_seconds=2)
        await world.ack(d)
    assert await _depths(world) == {}
