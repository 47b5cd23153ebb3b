"""Attacks on ``drain_lanes`` on a real nats-server (issue #38): workers that receive and ack
while a drain runs, a drain cut off between copy and delete and run again, idempotency keys
across a drain, and delayed and retried messages."""

from __future__ import annotations

from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds, taken_names
from wayline._core import ordering
from wayline.worlds.nats import lane_drain


def ordered(name: str, priority: int = ordering.DEFAULT_PRIORITY, key: str = "") -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, 1).fields()}


async def kinds(world: Any, topic: str) -> dict[str, list[str]]:
    """The subject token after ``q`` of each stored message of ``topic``, by its name."""
    queue = world._queue
    out: dict[str, list[str]] = {}
    async for msg, payload in queue.stored(queue._names.topic_wildcard(topic)):
        out.setdefault(str(payload.get("name")), []).append(msg.subject.split(".")[2])
    return out


async def test_a_message_a_worker_takes_while_the_drain_runs_is_left_with_it(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain lists who delivered what once at its start; a worker that takes a message
    after that listing holds it, and the drain must not move it from under the worker (the
    copy would be served to a second worker beside it)."""
    world = await open_nats_world()
    topic = "drain-attack-taken-meanwhile"
    await world.enqueue(topic, ordered("taken-meanwhile", priority=3))
    await world.enqueue(topic, ordered("still-queued", priority=3))
    listed = lane_drain.delivered_seqs
    taken: list[Any] = []

    async def then_taken(js: Any, names: Any) -> dict[tuple[str, str], int]:
        seqs = await listed(js, names)
        taken.extend(await world.receive(topic, max_messages=1, wait_seconds=2))
        return seqs

    monkeypatch.setattr(lane_drain, "delivered_seqs", then_taken)
    done = await world.drain_lanes()
    assert [d.payload["name"] for d in taken] == ["taken-meanwhile"]
    assert (done.moved, done.held, done.delayed) == (1, 1, 0)
    assert await kinds(world, topic) == {"taken-meanwhile": ["p3"], "still-queued": ["t"]}
    assert await world.ack(taken[0]) is True
    assert await taken_names(world, topic, 1, batch=5) == ["still-queued"]
    assert await world.receive(topic, max_messages=5, wait_seconds=0.3) == []


@pytest.mark.parametrize("topic", ["plain-topic", "odd topic.é*>", "long/" * 40])
def test_the_consumer_asked_again_is_the_one_of_the_messages_subject(topic: str) -> None:
    """The drain names a level's consumer from the topic token of the message's subject: a
    plain, an encoded and a hashed topic each give the consumer a worker receives from."""
    from wayline.worlds.nats.names import Names, consumer_name

    token = Names("x").target_subject(topic, "m", "p3f2").split(".")[3]
    assert lane_drain.consumer_of("p3f2", token) == consumer_name(topic, "p3f2")
    assert lane_drain.consumer_of("p7", token) == consumer_name(topic, "p7")
