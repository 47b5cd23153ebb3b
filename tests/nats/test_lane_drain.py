"""``drain_lanes`` (``wayline queue drain-lanes``) moves NATS work of another priority and work
with a fairness key onto ``q.t``, the one subject a release before the priority levels reads,
so a rollback to such a release strands nothing: a message keeps its payload and its
idempotency key, a message a worker may hold is left unless asked, a delayed one is counted,
and nothing is lost or doubled."""

from __future__ import annotations

from typing import Any

from tests.nats_fixtures import OpenWorlds, taken_names
from wayline._core import ordering


def ordered(name: str, priority: int = ordering.DEFAULT_PRIORITY, key: str = "") -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, 1).fields()}


async def kinds(world: Any, topic: str) -> dict[str, str]:
    """The subject token after ``q`` of each stored message of ``topic``, by its name."""
    queue = world._queue
    return {
        str(payload.get("name")): msg.subject.split(".")[2]
        async for msg, payload in queue.stored(queue._names.topic_wildcard(topic))
    }


async def test_drained_work_is_on_the_subject_before_the_levels_and_served_once(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    topic = "lane-drain-moves"
    await world.enqueue(topic, ordered("plain"))
    await world.enqueue(topic, ordered("urgent", priority=2))
    await world.enqueue(topic, ordered("tenant", key="drain-tenant"))
    await world.enqueue(topic, ordered("keyed", priority=8), idempotency_key="drain-k")
    before = await kinds(world, topic)
    assert before["tenant"].startswith("p5f")
    assert {n: before[n] for n in ("plain", "urgent", "keyed")} == {
        "plain": "t",
        "urgent": "p2",
        "keyed": "p8",
    }
    done = await world.drain_lanes()
    assert (done.moved, done.held, done.delayed) == (3, 0, 0)
    assert await kinds(world, topic) == {n: "t" for n in ("plain", "urgent", "tenant", "keyed")}
    # the idempotency key still holds on the moved message: a second send under it is refused
    await world.enqueue(topic, ordered("again", priority=8), idempotency_key="drain-k")
    assert "again" not in await kinds(world, topic)
    got = await taken_names(world, topic, 4, batch=10)
    assert sorted(got) == ["keyed", "plain", "tenant", "urgent"]
    assert await world.receive(topic, max_messages=5, wait_seconds=0.3) == []
    assert (await world.drain_lanes()).moved == 0  # nothing left to move


async def test_a_held_message_is_left_unless_asked_and_a_delayed_one_is_counted(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    topic = "lane-drain-held"
    await world.enqueue(topic, ordered("held", priority=3))
    [delivery] = await world.receive(topic, max_messages=1, wait_seconds=2)
    await world.enqueue(topic, ordered("later", priority=3), delay_seconds=600)
    done = await world.drain_lanes()
    assert (done.moved, done.held, done.delayed) == (0, 1, 1)
    assert (await kinds(world, topic))["held"] == "p3"
    done = await world.drain_lanes(held_too=True)
    assert (done.moved, done.held, done.delayed) == (1, 0, 1)
    assert (await kinds(world, topic))["held"] == "t"
    # the holder's ack after the move settles nothing of the copy: it is served again
    await world.ack(delivery)
    assert await taken_names(world, topic, 1, batch=1) == ["held"]


async def test_every_page_of_consumers_is_read() -> None:
    """The server lists 256 consumers a page: the drain reads them all, or a held message of a
    consumer past the first page would be taken for never delivered and moved."""
    from types import SimpleNamespace

    from wayline.worlds.nats.lane_drain import delivered_seqs
    from wayline.worlds.nats.names import Names

    names = Names("pages")
    consumers = [
        SimpleNamespace(
            config=SimpleNamespace(filter_subject=f"pages.q.p3.topic{i}.>"),
            delivered=SimpleNamespace(stream_seq=i + 1),
        )
        for i in range(600)
    ]

    class Js:
        async def consumers_info(self, stream: str, offset: int | None = None) -> list[Any]:
            assert stream == names.queue_stream
            return consumers[offset or 0 :][:256]

    seqs = await delivered_seqs(Js(), names)
    assert len(seqs) == 600 and seqs[("p3", "topic599")] == 600


async def test_a_partition_drains_in_place_and_leaves_its_held_work(
    open_nats_world: OpenWorlds,
) -> None:
    """In a world of three partitions, work about a run of partition 2 is drained onto that
    partition's own ``q2.t``, never into partition 0's queue, and a message a worker of
    partition 2 holds is seen as held there (its consumers filter on ``q2``, not ``q``)."""
    from wayline._core.ids import new_run_id
    from wayline.worlds.nats.names import partition_of

    world = await open_nats_world(partitions=3)
    topic = "lane-drain-part2"
    run_id = next(r for r in iter(new_run_id, "") if partition_of(r, 3) == 2)
    await world.enqueue(topic, {**ordered("held", priority=3), "runId": run_id})
    [delivery] = await world.receive(topic, max_messages=1, wait_seconds=2)
    await world.enqueue(topic, {**ordered("free", priority=3), "runId": run_id})
    done = await world.drain_lanes()
    assert (done.moved, done.held, done.delayed) == (1, 1, 0)
    two, zero = world._queues[2], world._queues[0]
    held = {
        str(payload.get("name")): msg.subject
        async for msg, payload in two.stored(two._names.topic_wildcard(topic))
    }
    prefix = world.prefix
    assert held == {"held": f"{prefix}.q2.p3.{topic}.{held['held'].rsplit('.', 1)[1]}"} | {
        "free": f"{prefix}.q2.t.{topic}.{held['free'].rsplit('.', 1)[1]}"
    }
    assert [m async for m in zero.stored(zero._names.topic_wildcard(topic))] == []
    await world.ack(delivery)
    assert await taken_names(world, topic, 1, batch=1) == ["free"]
