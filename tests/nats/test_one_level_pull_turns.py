"""A NATS receive that waits with one long pull on its topic's only recorded level looks again
at least every half second, so a message published meanwhile on another level (urgent work,
which a heard publish records but does not let end the pull) is received by the same receive
after one pull at most, even when the receive waits much longer (a worker with fewer slots
than topics waits 1.5 s or more). Counted, not timed: the waits of the long pulls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core import ordering
from wayline.worlds.nats import queue as nats_queue


async def test_a_long_receive_on_one_level_looks_again_within_half_a_second(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    topic = "one-level-pull-turns"
    await world.enqueue(topic, {"name": "default"})
    [first] = await world.receive(topic, max_messages=1, wait_seconds=2)
    assert await world.ack(first)
    pulls: list[float] = []
    wait_one = nats_queue.Queue._wait_one

    async def counted(self: Any, asked: str, level: Any, wait: float, *rest: Any) -> Any:
        pulls.append(wait)
        return await wait_one(self, asked, level, wait, *rest)  # rest: the receive's list

    monkeypatch.setattr(nats_queue.Queue, "_wait_one", counted)

    async def urgent_later() -> None:
        while not pulls:  # noqa: ASYNC110 - the pull's start sets no event of its own
            await asyncio.sleep(0.01)
        await world.enqueue(topic, {"name": "urgent", **ordering.Ordering(priority=0).fields()})

    publishing = asyncio.ensure_future(urgent_later())
    got = await world.receive(topic, max_messages=1, wait_seconds=1.9)
    await publishing
    assert [(d.payload or {}).get("name") for d in got] == ["urgent"]
    assert pulls and max(pulls) <= 0.5, pulls
    for delivery in got:
        assert await world.ack(delivery)
