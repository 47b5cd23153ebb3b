"""The NATS world's queue keeps a subject per priority level under each topic: a message
another release left on the subject every level shared is still served (first), an
idempotency key holds across the levels, and the counts of ready work add the levels up."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from tests.nats_fixtures import OpenWorlds, taken_names
from wayline._core import ordering
from wayline.worlds.nats.codec import rfc3339
from wayline.worlds.nats.levels import RESCAN_SECONDS


async def test_a_message_on_the_subject_of_before_the_levels_is_still_served(
    open_nats_world: OpenWorlds,
) -> None:
    """A world provisioned before the levels holds its queued work on ``q.t.<topic>``: after
    the upgrade its consumer is drained too, as the default level it holds (after a more
    urgent level, before a less urgent one)."""
    world = await open_nats_world()
    js = world._queue._js
    old_subject = f"{world.names.prefix}.q.t.flow.{uuid.uuid4().hex}"
    await js.publish(old_subject, json.dumps({"name": "from-before"}).encode())
    urgent = ordering.Ordering(priority=0).fields()
    await world.enqueue("flow", {"name": "urgent", **urgent})
    await world.enqueue("flow", {"name": "later", **ordering.Ordering(priority=7).fields()})
    assert await world._queue.ready("flow") == 3
    got = await world.receive("flow", max_messages=5, wait_seconds=2)
    assert [(d.payload or {})["name"] for d in got] == ["urgent", "from-before", "later"]
    for delivery in got:
        assert await world.ack(delivery) is True
    assert await world.receive("flow", wait_seconds=0.2) == []


async def test_a_delayed_message_an_older_release_scheduled_onto_the_old_subject_is_served(
    open_nats_world: OpenWorlds,
) -> None:
    """A schedule an older release stored (its target the one subject of every level,
    ``q.t``) fires after the upgrade onto that subject, and the kept consumer of it serves it
    with the id the older release handed out."""
    world = await open_nats_world()
    names = world._queue._names
    mid = uuid.uuid4().hex
    await world._queue._js.publish(
        names.schedule_subject("flow", mid),
        json.dumps({"name": "delayed-from-before"}).encode(),
        headers={
            "Nats-Schedule": f"@at {rfc3339(world.skew.now() + 0.5)}",
            "Nats-Schedule-Target": f"{names.prefix}.q.t.flow.{mid}",
            "Wayline-Id": mid,
        },
    )
    got = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got = await world.receive("flow", wait_seconds=1)
    [delivery] = got
    assert (delivery.message_id, delivery.payload) == (mid, {"name": "delayed-from-before"})
    assert await world.ack(delivery) is True


async def test_an_idempotency_key_holds_across_priority_levels(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    low = ordering.Ordering(priority=8).fields()
    high = ordering.Ordering(priority=1).fields()
    first = await world.enqueue("flow", {"v": 1, **low}, idempotency_key="k")
    assert await world.enqueue("flow", {"v": 2, **high}, idempotency_key="k") == first
    [d] = await world.receive("flow", max_messages=5, wait_seconds=2)
    assert (d.message_id, d.payload) == (first, {"v": 1, **low})
    assert await world.ack(d) is True


async def test_a_delayed_urgent_message_goes_before_ready_default_work_once_due(
    open_nats_world: OpenWorlds,
) -> None:
    """A schedule's publish names its level, so a receiver waiting on the default level's
    backlog learns of the urgent level before the message fires."""
    world = await open_nats_world()
    urgent = ordering.Ordering(priority=0).fields()
    await world.enqueue("flow", {"name": "urgent", **urgent}, delay_seconds=0.5)
    for i in range(3):
        await world.enqueue("flow", {"name": f"default{i}"})
    [first] = await world.receive("flow", wait_seconds=2)
    assert (first.payload or {})["name"] == "default0"
    await world.ack(first)
    await asyncio.sleep(1.0)  # the schedule is due after 0.5 s
    names: list[str] = []
    while len(names) < 3:
        got = await world.receive("flow", wait_seconds=3)
        assert got
        names += [str((d.payload or {})["name"]) for d in got]
        for delivery in got:
            await world.ack(delivery)
    assert names == ["urgent", "default1", "default2"]


@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_level_no_publish_told_of_is_found_while_the_one_known_level_is_drained(
    open_nats_world: OpenWorlds, partitions: int
) -> None:
    """A worker whose every receive ends in a wait on the one level it knows (its consumer
    drained, each wait shorter than the rescan period) still rescans when one is due, so a
    message on a level it heard nothing of (sent while a partition cut its connection from the
    publisher's node) is served within a rescan or two, not never; on every partition's
    queue, whose rescans share one question for all the topics served on it."""
    world = await open_nats_world(partitions=partitions)
    await world.enqueue("flow", {"name": "heard"})
    [first] = await world.receive("flow", wait_seconds=2)
    assert await world.ack(first) is True
    assert await world.receive("flow", wait_seconds=0.3) == []  # the known level is drained
    # The record stops hearing the topic's publishes, as when a partition cuts them off.
    for queue in world._queues:  # every partition's queue was asked by the receives
        await queue._levels["flow"].sub.unsubscribe()
    await world.enqueue("flow", {"name": "unheard", **ordering.Ordering(priority=3).fields()})
    names: list[str] = []
    deadline = time.monotonic() + 4 * RESCAN_SECONDS
    while not names and time.monotonic() < deadline:
        got = await world.receive("flow", wait_seconds=0.5)  # a worker's receive
        names += [str((d.payload or {})["name"]) for d in got]
        for delivery in got:
            assert await world.ack(delivery) is True
    assert names == ["unheard"]


async def test_a_level_emptied_and_filled_again_is_served_first_again(
    open_nats_world: OpenWorlds,
) -> None:
    """A level found empty leaves the record; a message sent on it later brings it back (by
    the publish heard, else by the next rescan) and it is served before the default level's
    backlog again."""
    world = await open_nats_world()
    urgent = ordering.Ordering(priority=2).fields()
    for i in range(3):
        await world.enqueue("flow", {"name": f"default{i}"})
    await world.enqueue("flow", {"name": "urgent0", **urgent})
    names: list[str] = []
    for _ in range(2):  # the urgent one, then the first of the backlog: level 2 is empty now
        [delivery] = await world.receive("flow", wait_seconds=2)
        names.append(str((delivery.payload or {})["name"]))
        assert await world.ack(delivery) is True
    await world.enqueue("flow", {"name": "urgent1", **urgent})
    while len(names) < 5:
        got = await world.receive("flow", wait_seconds=3)
        assert got
        for delivery in got:
            names.append(str((delivery.payload or {})["name"]))
            assert await world.ack(delivery) is True
    assert names == ["urgent0", "default0", "urgent1", "default1", "default2"]


async def test_a_level_whose_consumer_the_server_refuses_holds_up_no_other_level(
    open_nats_world: OpenWorlds,
) -> None:
    """A level whose consumer cannot be created is skipped, not fatal to the receive: the
    other levels are served meanwhile, and the level is served once its consumer can be made."""
    from nats.js.api import AckPolicy, ConsumerConfig

    world = await open_nats_world()
    js, names = world._queue._js, world._queue._names
    # A work-queue stream refuses a consumer whose filter overlaps another's: while this one
    # of someone else's covers level 3 of the topic, the world cannot create its own there.
    rogue = ConsumerConfig(
        durable_name="rogue-level-3",
        filter_subject=names.target_filter("flow", "p3"),
        ack_policy=AckPolicy.EXPLICIT,
    )
    await js.add_consumer(names.queue_stream, rogue)
    await world.enqueue("flow", {"name": "urgent", **ordering.Ordering(priority=3).fields()})
    await world.enqueue("flow", {"name": "default"})
    got = await world.receive("flow", max_messages=5, wait_seconds=2)
    assert [(d.payload or {})["name"] for d in got] == ["default"]
    assert await world.ack(got[0]) is True
    await js.delete_consumer(names.queue_stream, "rogue-level-3")
    got = await world.receive("flow", max_messages=5, wait_seconds=2)
    assert [(d.payload or {})["name"] for d in got] == ["urgent"]
    assert await world.ack(got[0]) is True


async def test_a_consumer_of_a_release_before_the_levels_receives_default_priority_work(
    open_nats_world: OpenWorlds,
) -> None:
    """A worker of a release before the levels reads only ``q.t.<topic>`` through the consumer
    ``q_<topic>``: a message this release sends without a priority reaches it, so a rollout
    from (or a rollback to) such a release strands none of the default priority's work. A
    message of another priority stays on its level for a worker that reads the levels."""
    world = await open_nats_world()
    js, names = world._queue._js, world._queue._names
    topic = "flow-before-levels"
    await world.enqueue(topic, {"name": "plain"})
    await world.enqueue(topic, {"name": "urgent", **ordering.Ordering(priority=1).fields()})
    # The consumer exactly as the release before the levels made it (its name, its filter).
    old = await js.pull_subscribe(
        f"{names.prefix}.q.t.{topic}.>", durable=f"q_{topic}", stream=names.queue_stream
    )
    [msg] = await old.fetch(5, timeout=2)
    assert json.loads(msg.data)["name"] == "plain"
    await msg.ack_sync()
    await old.unsubscribe()
    got = await world.receive(topic, max_messages=5, wait_seconds=2)
    assert [(d.payload or {})["name"] for d in got] == ["urgent"]
    assert await world.ack(got[0]) is True


async def test_default_priority_work_left_on_its_level_subject_is_still_served(
    open_nats_world: OpenWorlds,
) -> None:
    """A release that sent every priority on the levels left its default-priority work on
    ``q.p5``: it is served with the default work on ``q.t``, the older first, after the more
    urgent levels and before the less urgent ones."""
    world = await open_nats_world()
    js, names = world._queue._js, world._queue._names
    topic = "flow-left-on-p5"
    await js.publish(
        names.target_subject(topic, uuid.uuid4().hex, f"p{ordering.DEFAULT_PRIORITY}"),
        json.dumps({"name": "left-on-p5"}).encode(),
    )
    await world.enqueue(topic, {"name": "plain"})
    await world.enqueue(topic, {"name": "low", **ordering.Ordering(priority=9).fields()})
    await world.enqueue(topic, {"name": "urgent", **ordering.Ordering(priority=4).fields()})
    assert await world._queue.ready(topic) == 4
    assert await taken_names(world, topic, 4) == ["urgent", "left-on-p5", "plain", "low"]
