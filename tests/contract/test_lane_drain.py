"""World contract: ``drain_lanes`` (before a rollback to a release before the priority levels)
loses and repeats nothing on any world: every message of any priority and fairness key is still
received once after it. Only NATS keeps levels and lanes on subjects of their own, so only it
moves anything (tests/nats/test_lane_drain.py has where the messages go)."""

from __future__ import annotations

from typing import Any

from wayline._core import ordering
from wayline.world import World


def ordered(name: str, priority: int, key: str) -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, 1).fields()}


async def test_a_drain_loses_and_repeats_nothing(world: World) -> None:
    topic = "flow:w:lane-drain-contract"
    sent = []
    for priority in (2, ordering.DEFAULT_PRIORITY, 8):
        for key in ("", "drain-contract-a", "drain-contract-b"):
            name = f"p{priority}/{key or '-'}"
            await world.enqueue(topic, ordered(name, priority, key))
            sent.append(name)
    done = await world.drain_lanes()
    assert done.held == 0 and done.delayed == 0
    assert done.moved in (0, 8)  # NATS moves all but the default priority without a key
    got: list[str] = []
    while len(got) < len(sent):
        batch = await world.receive(topic, max_messages=10, wait_seconds=2)
        assert batch, got
        for delivery in batch:
            got.append(str((delivery.payload or {})["name"]))
            assert await world.ack(delivery) is True
    assert sorted(got) == sorted(sent)
    assert await world.receive(topic, max_messages=5, wait_seconds=0.3) == []
