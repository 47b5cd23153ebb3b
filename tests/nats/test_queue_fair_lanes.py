"""The NATS world gives the fairness keys of one priority level fair turns: a key's work goes
to one of ``FAIR_LANES`` lanes of its level (a subject and a consumer each, made when first
used), picked by a hash of the key, and a receive takes the lanes of a level in turns
weighted by their work's fairness weight. Work without a key keeps its subject (the default
priority's is the one before the levels)."""

from __future__ import annotations

import time
from typing import Any

from tests.nats_fixtures import OpenWorlds, taken_names
from wayline._core import ordering
from wayline.worlds.nats.levels import LANE_SCAN_EVERY, RESCAN_SECONDS
from wayline.worlds.nats.names import FAIR_LANES, consumer_name, lane_of
from wayline.worlds.nats.queue import _plan


def keyed(
    name: str, key: str, priority: int = ordering.DEFAULT_PRIORITY, weight: int = 1
) -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, weight).fields()}


async def test_a_small_tenant_behind_a_large_backlog_gets_its_turn_at_once(
    open_nats_world: OpenWorlds,
) -> None:
    """200 messages of key A, then 3 of key B, at the default priority and at priority 7: B's
    are taken within the first six, one receive at a time (first in, first out, they were
    201st to 203rd)."""
    assert lane_of("tenant-A") != lane_of("tenant-B")
    world = await open_nats_world()
    for priority in (ordering.DEFAULT_PRIORITY, 7):
        topic = f"fair-lanes-backlog-p{priority}"
        for i in range(200):
            await world.enqueue(topic, keyed(f"a{i}", "tenant-A", priority))
        for i in range(3):
            await world.enqueue(topic, keyed(f"b{i}", "tenant-B", priority))
        got = await taken_names(world, topic, 6, batch=1)
        assert sorted(n for n in got if n.startswith("b")) == ["b0", "b1", "b2"], got
        assert [n for n in got if n.startswith("a")] == ["a0", "a1", "a2"]


async def test_a_batch_gives_a_key_of_weight_three_three_turns_to_one(
    open_nats_world: OpenWorlds,
) -> None:
    assert lane_of("heavy-tenant") != lane_of("light-tenant")
    world = await open_nats_world()
    topic = "fair-lanes-weights"
    for i in range(20):
        await world.enqueue(topic, keyed(f"h{i}", "heavy-tenant", weight=3))
        await world.enqueue(topic, keyed(f"l{i}", "light-tenant"))
    got = await world.receive(topic, max_messages=8, wait_seconds=2)
    names = [str((d.payload or {})["name"]) for d in got]
    assert (sum(n.startswith("h") for n in names), sum(n.startswith("l") for n in names)) == (6, 2)
    for delivery in got:
        assert await world.ack(delivery) is True


async def test_forty_keys_make_no_more_consumers_than_a_level_has_lanes(
    open_nats_world: OpenWorlds,
) -> None:
    """Forty keys at one priority make at most ``FAIR_LANES`` consumers for it (one for each
    lane the keys hash to), however many keys there are, and that level is served first."""
    world = await open_nats_world()
    js, names = world._queue._js, world._queue._names
    topic = "fair-lanes-bounded"
    for i in range(40):
        await world.enqueue(topic, keyed(f"k{i}", f"tenant-{i}", priority=3))
    await world.enqueue(topic, {"name": "plain"})
    await world.enqueue(topic, keyed("keyed-default", "tenant-0"))
    taken = await taken_names(world, topic, 42, batch=10)
    assert sorted(taken[:40]) == sorted(f"k{i}" for i in range(40))  # level 3 first
    made = [
        info.name
        for info in await js.consumers_info(names.queue_stream)
        if info.name.endswith(f"_{topic}") and info.name.startswith("qp3")
    ]
    lanes = {lane_of(f"tenant-{i}") for i in range(40)}
    assert sorted(made) == sorted(consumer_name(topic, f"p3f{lane}") for lane in lanes)
    assert len(made) <= FAIR_LANES


async def test_default_work_with_a_key_is_not_on_the_subject_before_the_levels(
    open_nats_world: OpenWorlds,
) -> None:
    """The default priority's work without a key stays on ``q.t`` (read by a worker of a
    release before the levels); with a key it goes to its lane of level 5."""
    world = await open_nats_world()
    names = world._queue._names
    topic = "fair-lanes-where"
    await world.enqueue(topic, {"name": "plain"})
    await world.enqueue(topic, keyed("keyed", "tenant-where"))
    seen = {}
    async for msg, payload in world._queue.stored(names.target_filter(topic, "t")):
        seen[str(payload["name"])] = msg.subject.split(".")[2]
    lane = f"p{ordering.DEFAULT_PRIORITY}f{lane_of('tenant-where')}"
    async for msg, payload in world._queue.stored(names.target_filter(topic, lane)):
        seen[str(payload["name"])] = msg.subject.split(".")[2]
    assert seen == {"plain": "t", "keyed": lane}


def test_a_lane_shorter_than_its_turns_lets_no_less_urgent_level_pass() -> None:
    """A level's lanes are asked for what the first turns left of a batch before the next
    level is: the plan ends each level with every lane of it again."""
    firsts = {"p5f0": (1.0, 1), "p5f1": (2.0, 1), "p7": (0.5, 1)}
    plan = _plan(firsts, {}, 4, now=3.0, aging=60.0)
    assert [(t.channel, t.count) for t in plan] == [
        ("p5f0", 2),
        ("p5f1", 2),
        ("p5f0", 4),
        ("p5f1", 4),
        ("p7", 4),
        ("p7", 4),
    ]


async def test_a_lane_no_publish_told_of_is_found_by_a_later_full_scan(
    open_nats_world: OpenWorlds,
) -> None:
    """A full scan asks the lanes every ``LANE_SCAN_EVERY``-th time: a keyed message this
    process heard nothing of (sent while a partition cut it off) is served within that many
    rescans, not never."""
    world = await open_nats_world()
    topic = "fair-lanes-unheard"
    await world.enqueue(topic, {"name": "heard"})
    assert await taken_names(world, topic, 1) == ["heard"]
    levels = world._queue._levels[topic]
    await levels.sub.unsubscribe()  # the record stops hearing the topic's publishes
    await world.enqueue(topic, keyed("unheard", "tenant-unheard", priority=2))
    names: list[str] = []
    deadline = time.monotonic() + (LANE_SCAN_EVERY + 2) * RESCAN_SECONDS
    while not names and time.monotonic() < deadline:
        got = await world.receive(topic, wait_seconds=0.5)  # a worker's receive
        names += [str((d.payload or {})["name"]) for d in got]
        for delivery in got:
            assert await world.ack(delivery) is True
    assert names == ["unheard"]
