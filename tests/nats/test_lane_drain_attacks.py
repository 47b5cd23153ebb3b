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


async def test_a_drain_cut_off_between_copy_and_delete_and_run_again_keeps_one_of_each(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain killed after copying a message and before deleting it leaves the message twice;
    run again, it copies nothing a second time (the copy id is the original's sequence) and
    deletes the original, so each message is served once, and the idempotency key of a keyed
    message with a fairness key still refuses a second start throughout."""
    from wayline.errors import WorldError

    world = await open_nats_world()
    topic = "drain-attack-cut-off"
    first = await world.enqueue(
        topic, ordered("keyed-tenant", priority=2, key="cut-tenant"), idempotency_key="cut-k"
    )
    await world.enqueue(topic, ordered("tenant", key="cut-tenant"))
    await world.enqueue(topic, ordered("urgent", priority=1))
    queue = world._queue
    remove = queue.remove_stored

    async def killed(seq: int) -> None:
        raise WorldError("the drain was killed here")

    monkeypatch.setattr(queue, "remove_stored", killed)
    with pytest.raises(WorldError, match="killed"):
        await world.drain_lanes()
    cut = await kinds(world, topic)  # the first message, copied and never deleted
    assert sorted(cut["keyed-tenant"]) == ["p2f" + cut["keyed-tenant"][0][3:], "t"]
    assert len(cut["tenant"]) == 1 and cut["tenant"][0].startswith("p5f")
    assert cut["urgent"] == ["p1"]
    # the key is held by both the original and its copy: a second start is refused
    again = await world.enqueue(
        topic, ordered("keyed-again", priority=2, key="cut-tenant"), idempotency_key="cut-k"
    )
    assert "keyed-again" not in await kinds(world, topic)
    monkeypatch.setattr(queue, "remove_stored", remove)
    done = await world.drain_lanes()
    assert (done.moved, done.held, done.delayed) == (3, 0, 0)
    assert await kinds(world, topic) == {n: ["t"] for n in ("keyed-tenant", "tenant", "urgent")}
    again = await world.enqueue(
        topic, ordered("keyed-again", priority=2, key="cut-tenant"), idempotency_key="cut-k"
    )
    assert "keyed-again" not in await kinds(world, topic)
    got = await taken_names(world, topic, 3, batch=5)
    assert sorted(got) == ["keyed-tenant", "tenant", "urgent"]
    assert await world.receive(topic, max_messages=5, wait_seconds=0.3) == []
    assert first != again  # the key's answer names the message that holds it now: the copy


async def test_a_retry_waiting_out_its_delay_is_left_and_counted_delayed_even_held_too(
    open_nats_world: OpenWorlds,
) -> None:
    """A message handed back to come again in ten minutes is held by no worker; moving it
    (``--held-too``) would serve its copy at once, its retry's delay lost. It is counted as
    delayed and left on its level, and its delay note still counts it as delayed."""
    world = await open_nats_world()
    topic = "drain-attack-retry-delay"
    await world.enqueue(topic, ordered("retried", priority=3, key="retry-tenant"))
    [delivery] = await world.receive(topic, max_messages=1, wait_seconds=2)
    assert await world.retry(delivery, 600) is True
    for held_too in (False, True):
        done = await world.drain_lanes(held_too=held_too)
        assert (done.moved, done.held, done.delayed) == (0, 0, 1), held_too
    [kind] = (await kinds(world, topic))["retried"]
    assert kind.startswith("p3f")
    assert await world.receive(topic, max_messages=1, wait_seconds=0.5) == []
