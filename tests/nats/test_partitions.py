"""A NATS world of several partitions (``?partitions=N``, docs/nats.md "Partitions"): each run's
events and queue messages live in the streams of the partition its id hashes to, a world of
one partition keeps today's names, the count is fixed when the world is made, and a bad count
is refused. On a real nats-server; the contract suite and the runtime tests marked
``partitioned`` run on a world of three partitions as well (``tests/conftest.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import uuid4

import pytest

import wayline
from tests.nats_fixtures import NatsServer, NatsWorldFactory, OpenWorlds
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline.errors import ConfigurationError
from wayline.worlds.nats import NatsWorld
from wayline.worlds.nats.names import MAX_PARTITIONS, Names, partition_of


async def _stream_states(world: Any, streams: list[str]) -> dict[str, Any]:
    js = world._js
    return {name: (await js.stream_info(name)).state for name in streams}


async def _exists(world: Any, stream: str) -> bool:
    import nats.js.errors

    try:
        await world._js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        return False
    return True


def test_a_run_partition_is_a_stable_hash_of_its_id() -> None:
    # sha256 of the id, the same in every process and release: Python's hash() is salted
    assert [partition_of(f"run-{i}", 3) for i in range(8)] == [1, 0, 2, 1, 1, 0, 0, 0]
    assert {partition_of(f"run-{i}", 1) for i in range(50)} == {0}
    assert Names("w").partition(0) == Names("w")


def test_partition_zero_has_todays_names_and_others_do_not_overlap() -> None:
    zero, two = Names("w"), Names("w").partition(2)
    assert (zero.events_stream, zero.queue_stream) == ("w_events", "w_queue")
    assert (zero.events_wildcard, zero.queue_wildcard) == ("w.ev.*", "w.q.>")
    assert zero.target_subject("flow", "m") == "w.q.t.flow.m"
    assert (two.events_stream, two.queue_stream) == ("w_events_p2", "w_queue_p2")
    assert (two.events_wildcard, two.queue_wildcard) == ("w.ev2.*", "w.q2.>")
    assert two.target_subject("flow", "m") == "w.q2.t.flow.m"
    assert two.stamps_wildcard == "w.evts2.*" and zero.stamps_wildcard == "w.evts.*"
    # hashed the same way in a hook, and the archive, dead letters and buckets stay one
    assert two.hooks_bucket == zero.hooks_bucket and two.archive_stream == zero.archive_stream


@pytest.mark.parametrize(
    "query", ["partitions=0", "partitions=-1", "partitions=abc", "partitions=65", "partitions=1e3"]
)
def test_a_bad_partition_count_in_the_url_is_refused(query: str) -> None:
    with pytest.raises(ConfigurationError, match="partitions"):
        NatsWorld.from_url(f"nats://127.0.0.1:4222?prefix=p&{query}")


@pytest.mark.parametrize("value", [0, -3, MAX_PARTITIONS + 1, 10**9, True, 2.5, "3"])
def test_a_bad_partition_count_given_as_an_option_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="partitions"):
        NatsWorld("nats://127.0.0.1:4222", prefix="p", partitions=value)


async def test_a_world_of_one_partition_has_todays_streams_and_records_nothing(
    nats_world_factory: NatsWorldFactory,
) -> None:
    world = await nats_world_factory()
    await world.start()
    try:
        p = world.prefix
        assert await _exists(world, f"{p}_events") and await _exists(world, f"{p}_queue")
        for other in (f"{p}_events_p1", f"{p}_queue_p1", f"KV_{p}_meta"):
            assert not await _exists(world, other), other
    finally:
        await world.close()


async def test_a_world_made_with_one_partition_refuses_another_count(
    nats_world_factory: NatsWorldFactory,
) -> None:
    """A world made before partitions (or with one) opened by a process asking for three:
    refused, naming both counts, and nothing is created; it opens as it was with one."""
    old = await nats_world_factory()
    await old.start()
    await old.close()
    newer = await nats_world_factory(partitions=3)
    with pytest.raises(ConfigurationError, match=r"provisioned with 1 partition, not the 3"):
        await newer.start()
    again = await nats_world_factory()
    await again.start()
    try:
        for other in (f"{again.prefix}_events_p1", f"KV_{again.prefix}_meta"):
            assert not await _exists(again, other), other
    finally:
        await again.close()


async def test_a_world_made_with_three_partitions_refuses_one_or_two(
    nats_world_factory: NatsWorldFactory,
) -> None:
    made = await nats_world_factory(partitions=3)
    await made.start()
    await made.close()
    for asked in (1, 2):
        other = await nats_world_factory(partitions=asked)
        with pytest.raises(
            ConfigurationError, match=rf"provisioned with 3 partitions, not .*{asked}"
        ):
            await other.start()
    same = await nats_world_factory(partitions=3)
    await same.start()
    await same.close()


async def test_two_processes_making_a_world_with_different_counts_cannot_both_win(
    nats_world_factory: NatsWorldFactory,
) -> None:
    worlds = [await nats_world_factory(partitions=n) for n in (2, 3, 2, 3)]
    results = await asyncio.gather(*(w.start() for w in worlds), return_exceptions=True)
    try:
        started = [w.partitions for w, r in zip(worlds, results, strict=True) if r is None]
        refused = [r for r in results if isinstance(r, ConfigurationError)]
        assert len(set(started)) == 1 and len(started) == 2 and len(refused) == 2, results
    finally:
        for world in worlds:
            await world.close()


async def test_runs_spread_over_the_partitions_streams_and_are_listed_and_cleaned_as_one(
    open_nats_world: OpenWorlds,
) -> None:
    """Runs of a world of three partitions land in all three events streams, each run in the
    one its id hashes to, their queue messages in all three queue streams; listing, paging,
    counting and cleanup see every run."""
    world = await open_nats_world(partitions=3)
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.chain], settings=settings()):
        handles = [await client.start(flows.chain, 3) for _ in range(24)]
        assert [await h.result(timeout=30) for h in handles] == [3] * 24
    ids = {h.run_id for h in handles}
    parts = {partition_of(r, 3) for r in ids}
    assert parts == {0, 1, 2}
    events = [world.names.partition(p).events_stream for p in range(3)]
    queues = [world.names.partition(p).queue_stream for p in range(3)]
    states = await _stream_states(world, events + queues)
    for name in events:
        assert states[name].messages > 0, (name, states[name])
    for name in queues:  # work-queue streams: what was stored is gone, its sequence stays
        assert states[name].last_seq > 0, (name, states[name])
    for run_id in ids:  # each run's log is in its own partition's stream, only there
        home = world.names_of(run_id)
        for part in range(3):
            other = world.names.partition(part)
            found = await world._js.stream_info(
                other.events_stream, subjects_filter=other.run_subject(run_id)
            )
            held = other.run_subject(run_id) in (found.state.subjects or {})
            assert held is (other == home), (run_id, part)

    listed = await world.list_runs(limit=100)
    assert {i.run_id for i in listed} >= ids
    assert [i.created_at for i in listed] == sorted((i.created_at for i in listed), reverse=True)
    assert (await world.count_runs())[wayline.RunStatus.COMPLETED] == 24
    paged: list[str] = []
    after = None
    while True:
        page = await world.runs_page(after=after, limit=5)
        if not page:
            break
        paged += [i.run_id for i in page]
        after = (page[-1].created_at, page[-1].run_id)
    assert sorted(paged) == sorted(ids)

    assert await world.delete_runs(older_than=-time.time()) == 24
    assert await world.list_runs(limit=100) == []
    for name in events:
        assert (await world._js.stream_info(name)).state.messages == 0, name


async def test_a_partitioned_world_is_opened_from_its_url(nats_server: NatsServer) -> None:
    world = NatsWorld.from_url(f"{nats_server.url}?prefix=pu{int(time.time() * 1e6)}&partitions=2")
    assert world.partitions == 2 and world.url.endswith("&partitions=2")
    await world.start()
    try:
        p = world.prefix
        assert await _exists(world, f"{p}_events_p1") and await _exists(world, f"{p}_queue_p1")
        assert not await _exists(world, f"{p}_events_p2")
    finally:
        await world.close()


async def test_a_world_told_to_consume_some_partitions_takes_work_from_those_only(
    open_nats_world: OpenWorlds,
) -> None:
    sender = await open_nats_world(partitions=3)
    taker = await open_nats_world(partitions=3, consume="2,1")
    assert taker.consumed == [1, 2]
    runs = [f"consume-run-{i}" for i in range(30)]
    for run_id in runs:
        await sender.enqueue("pconsume", {"runId": run_id})
    wanted = {r for r in runs if partition_of(r, 3) in (1, 2)}
    assert wanted and len(wanted) < len(runs)
    got: set[str] = set()
    while True:
        batch = await taker.receive("pconsume", max_messages=10, wait_seconds=0.5)
        if not batch:
            break
        assert len(batch) <= 10
        for delivery in batch:
            got.add(str((delivery.payload or {})["runId"]))
            assert await taker.ack(delivery)
    assert got == wanted
    rest: set[str] = set()  # the first partition's, which a worker of every one takes
    while batch := await sender.receive("pconsume", max_messages=30, wait_seconds=0.5):
        rest |= {str((d.payload or {})["runId"]) for d in batch}
    assert rest == set(runs) - wanted


@pytest.mark.parametrize("consume", ["3", "-1", "a", "", [0, 7], [True]])
def test_consuming_a_partition_the_world_has_not_is_refused(consume: Any) -> None:
    with pytest.raises(ConfigurationError, match="consume"):
        NatsWorld("nats://127.0.0.1:4222", prefix="p", partitions=3, consume=consume)


async def test_children_hooks_and_cancels_cross_partitions_by_message(
    open_nats_world: OpenWorlds,
) -> None:
    """A parent whose child lives in another partition: the child's start, the resume of the
    child's hook and the child's report to its parent cross partitions, and so does a cancel
    of a parent to its child."""
    world = await open_nats_world(partitions=3)
    client = wayline.Client(world)
    crossing: list[tuple[Any, str, str]] = []  # (parent handle, child run id, token)
    async with wayline.Worker(world, [flows.parent_waits, flows.kid_waits], settings=settings()):
        for i in range(30):
            token = f"pcross-{uuid4()}-{i}"
            handle = await client.start(flows.parent_waits, token)
            hook = await wait_for(lambda token=token: world.get_hook(token), timeout=20)
            kid = hook.run_id
            if partition_of(kid, 3) != partition_of(handle.run_id, 3):
                crossing.append((handle, kid, token))
            else:
                await client.resume_hook(token, "same")
                assert await handle.result(timeout=20) == "same"
            if len(crossing) == 2:
                break
        assert len(crossing) == 2, "no parent and child in different partitions"
        (answered, _, token), (cancelled, kid, _) = crossing
        await client.resume_hook(token, {"from": "another partition"})
        assert await answered.result(timeout=20) == {"from": "another partition"}
        assert await client.cancel(cancelled.run_id, "crossing")

        async def kid_cancelled() -> bool:
            info = await client.get_run(kid)
            return info is not None and info.status is wayline.RunStatus.CANCELLED

        await wait_for(kid_cancelled, timeout=20)
