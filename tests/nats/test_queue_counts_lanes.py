"""The autoscaler's counts of one NATS topic (``ready_messages``, ``in_flight_messages``,
``delayed_messages``) are right across its subjects before the levels, its levels and its fair
lanes, whichever of their consumers exist: a lane no worker has received from yet has no
consumer, and what is stored on it is ready all the same."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core import ordering
from wayline.worlds.nats import queue as nats_queue
from wayline.worlds.nats.names import lane_of, subject_token


def keyed(name: str, key: str, priority: int = ordering.DEFAULT_PRIORITY) -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key).fields()}


async def counts(world: Any, topic: str) -> tuple[int, int, int]:
    ready = (await world.ready_messages([topic]))[topic]
    held = (await world.in_flight_messages([topic]))[topic]
    delayed = (await world.delayed_messages([topic], time.time() + 600))[topic]
    return ready, held, delayed


@pytest.mark.parametrize("listed_at_most", [10_000, 0], ids=["listed", "asked-each"])
@pytest.mark.parametrize(
    "stem", ["counts-across-lanes", "flow:w:counts@v1"], ids=["plain", "routed"]
)
async def test_counts_of_lanes_with_and_without_consumers(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, listed_at_most: int, stem: str
) -> None:
    """With a few messages a count lists the topic's subjects at once; with more than
    ``_LISTED_AT_MOST`` it asks each kind without a consumer (0 here: always). A routed topic
    is no plain subject token: its consumers' names are hashed."""
    monkeypatch.setattr(nats_queue, "_LISTED_AT_MOST", listed_at_most, raising=False)
    assert lane_of("counts-lane-a") != lane_of("counts-lane-b")
    world = await open_nats_world()
    topic = f"{stem}-{listed_at_most}"
    await world.enqueue(topic, {"name": "plain"})
    await world.enqueue(topic, keyed("a0", "counts-lane-a"))
    await world.enqueue(topic, keyed("a1", "counts-lane-a"))
    await world.enqueue(topic, {"name": "urgent", **ordering.Ordering(2, "").fields()})
    assert await counts(world, topic) == (4, 0, 0)  # no consumer exists yet

    got = await world.receive(topic, max_messages=4, wait_seconds=2)
    assert len(got) == 4
    by_name = {str((d.payload or {})["name"]): d for d in got}
    # Sent after every consumer above was made: a lane with no consumer holds them.
    await world.enqueue(topic, keyed("b0", "counts-lane-b"))
    await world.enqueue(topic, keyed("b1", "counts-lane-b", priority=7))
    await world.enqueue(topic, keyed("late", "counts-lane-a"), delay_seconds=300)
    assert await counts(world, topic) == (2, 4, 1)

    assert await world.release(by_name["a0"], delay_seconds=300) is True  # waits out a delay
    assert await world.ack(by_name["plain"]) is True
    assert await counts(world, topic) == (2, 2, 2)

    for name in ("a1", "urgent"):
        assert await world.ack(by_name[name]) is True
    assert await counts(world, topic) == (2, 0, 2)

    # Once every subject holding messages has a consumer, they account for all the topic
    # holds, and no subject is listed or asked.
    got = await world.receive(topic, max_messages=2, wait_seconds=2)
    assert sorted(str((d.payload or {})["name"]) for d in got) == ["b0", "b1"]
    await world.enqueue(topic, {"name": "plain-again"})
    await world.enqueue(topic, keyed("b2", "counts-lane-b"))
    queue = world._queue
    stream_info = queue._js.stream_info
    asked: list[str] = []

    async def spied(stream: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(stream)
        return await stream_info(stream, *args, **kwargs)

    monkeypatch.setattr(queue._js, "stream_info", spied)
    assert (await world.ready_messages([topic]))[topic] == 2
    assert queue._stream not in asked
    monkeypatch.undo()
    assert await counts(world, topic) == (2, 2, 2)
    for delivery in got:
        assert await world.ack(delivery) is True

    # Bytes published by hand under the topic, on a subject no message kind uses: never
    # served, so never ready (the count then lists the topic's subjects to tell).
    await queue._js.publish(f"{queue._names.prefix}.q.zz.{subject_token(topic)}.stray", b"{}")
    assert await counts(world, topic) == (2, 0, 2)
