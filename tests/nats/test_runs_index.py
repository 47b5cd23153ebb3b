"""The JetStream world's runs index against a real nats-server: it names each run once, with
the status its log has; a writer that died between its append and its index write (the append
made on the event log alone) leaves nothing wrong on the next page, and a world provisioned
before the index builds it on the first read."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_index

_WF = "runs-index-wf"


def _created() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_CREATED, data={"workflow": _WF, "input": []})]


def _completed() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]


async def _named(world: Any) -> dict[str, RunStatus]:
    """What the index says of each run, once every run is named once: the purge of a run's
    entry under its old status waits for no reply, so it may land a moment after the append
    (bounded wait; a run still named twice after it fails here)."""
    index = world._listing.runs()
    assert await world.flush_runs_index()  # the entries this process noted are written
    for _ in range(100):
        out: dict[str, RunStatus] = {}
        twice: list[str] = []
        for subject in await index.subjects(index.stream, f"{world.names.prefix}.ri.>"):
            entry = runs_index.entry_of(subject)
            assert entry is not None, subject
            if entry.run_id in out:
                twice.append(entry.run_id)
            out[entry.run_id] = entry.status
        if not twice:
            return out
        await asyncio.sleep(0.05)
    raise AssertionError(f"runs named twice: {twice}")


async def test_the_index_names_each_run_once_with_its_status(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(3)]
    for run_id in ids:
        await world.append(run_id, _created(), expected_seq=0)
    await world.append(ids[0], _completed(), expected_seq=1)
    assert await _named(world) == {
        ids[0]: RunStatus.COMPLETED,
        ids[1]: RunStatus.PENDING,
        ids[2]: RunStatus.PENDING,
    }
    await world.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED])
    assert set(await _named(world)) == {ids[1], ids[2]}


async def test_a_lost_index_write_is_repaired_when_the_runs_are_read(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    kept = new_run_id()
    await world.append(kept, _created(), expected_seq=0)
    assert await world.count_runs(workflow=_WF) == {RunStatus.PENDING: 1}
    # Two writers that died right after their appends landed, before the index write: one
    # created a run, one completed the run created above.
    events = world._events()
    lost = new_run_id()
    await events.append(lost, _created(), 0)
    await events.append(kept, _completed(), 1)
    page = await world.runs_page(after=None, limit=10, workflow=_WF)
    assert {(r.run_id, r.status) for r in page} == {
        (lost, RunStatus.PENDING),
        (kept, RunStatus.COMPLETED),
    }
    pending = await world.runs_page(after=None, limit=10, status=RunStatus.PENDING)
    assert [r.run_id for r in pending] == [lost]
    assert await _named(world) == {lost: RunStatus.PENDING, kept: RunStatus.COMPLETED}
    assert await world.count_runs(workflow=_WF) == {
        RunStatus.PENDING: 1,
        RunStatus.COMPLETED: 1,
    }


async def test_a_world_provisioned_before_the_index_builds_it_on_the_first_read(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(4)]
    for run_id in ids:
        await world.append(run_id, _created(), expected_seq=0)
    await world.append(ids[1], _completed(), expected_seq=1)
    index = world._listing.runs()
    assert await world.flush_runs_index()
    await world._log._js.purge_stream(index.stream)  # as a world made before the index had it
    assert await _named(world) == {}
    page = await world.runs_page(after=None, limit=2, workflow=_WF)
    assert [r.run_id for r in page] == [ids[3], ids[2]]
    assert await world.count_runs(workflow=_WF) == {
        RunStatus.PENDING: 3,
        RunStatus.COMPLETED: 1,
    }
    assert await _named(world) == {
        ids[0]: RunStatus.PENDING,
        ids[1]: RunStatus.COMPLETED,
        ids[2]: RunStatus.PENDING,
        ids[3]: RunStatus.PENDING,
    }


async def test_runs_with_ids_and_workflows_too_long_for_a_token_are_on_the_page(
    open_nats_world: OpenWorlds,
) -> None:
    """An id or workflow over 120 characters is hashed in the entry's subject; the entry's
    body gives it back, so such runs are listed, repaired and reconciled as any other."""
    world = await open_nats_world()
    long_id, long_flow = "r" * 121, "w" * 121
    await world.append(long_id, _created(), expected_seq=0)
    short = new_run_id()
    await world.append(
        short,
        [NewEvent(EventType.RUN_CREATED, data={"workflow": long_flow, "input": []})],
        expected_seq=0,
    )
    assert [r.run_id for r in await world.runs_page(after=None, limit=10, workflow=_WF)] == [
        long_id
    ]
    page = await world.runs_page(after=None, limit=10)
    assert [r.run_id for r in page] == [short, long_id]
    assert [r.run_id for r in await world.runs_page(after=None, limit=10, workflow=long_flow)] == [
        short
    ]
    # a run with a long id whose index write was lost is found by the reconciliation
    lost = "l" * 130
    await world._events().append(lost, _created(), 0)
    world._listing.runs().swept_at = time.monotonic() - 3600.0
    page = await world.runs_page(after=None, limit=10, workflow=_WF)
    assert [r.run_id for r in page] == [lost, long_id]
    assert await world.count_runs(workflow=_WF) == {RunStatus.PENDING: 2}


async def test_a_lost_write_behind_a_lost_purge_is_found_by_the_next_reconciliation(
    open_nats_world: OpenWorlds,
) -> None:
    """A run named twice (its purge lost) and a run not named (its write lost) give equal
    counts; the reconciliation that runs every ``RECONCILE_ANYWAY`` seconds finds it."""
    world = await open_nats_world()
    index = world._listing.runs()
    old = new_run_id()
    await world.append(old, _created(), expected_seq=0)
    stale_pending = index.subject(world._events().cached_info(old))
    for _ in range(12):  # newer runs fill the first page
        await world.append(new_run_id(), _created(), expected_seq=0)
    await world.append(old, _completed(), expected_seq=1)
    await _named(world)  # the purge of its pending entry has landed
    # the purge was lost: the pending entry is back; and a writer died after its append
    await world._log._js.publish(stale_pending, b"", stream=index.stream)
    lost = new_run_id()
    await world._events().append(lost, _created(), 0)
    assert lost not in [r.run_id for r in await world.runs_page(after=None, limit=10)]
    index.swept_at = time.monotonic() - 3600.0  # a minute went by
    page = await world.runs_page(after=None, limit=10)
    assert page[0].run_id == lost


async def test_a_late_repair_from_an_older_read_does_not_replace_a_newer_status(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    run_id = new_run_id()
    await world.append(run_id, _created(), expected_seq=0)
    read_before = world._events().cached_info(run_id)  # a page's read: pending
    await world.append(run_id, _completed(), expected_seq=1)  # a worker: completed
    await _named(world)
    await world._listing.runs().put(read_before)  # the page's repair lands after it
    assert await _named(world) == {run_id: RunStatus.COMPLETED}
    assert await world.count_runs(workflow=_WF) == {RunStatus.COMPLETED: 1}


async def test_a_late_purge_of_an_old_status_does_not_take_a_later_entry_under_it(
    open_nats_world: OpenWorlds,
) -> None:
    """Each status change purges the old entry with a request that waits for no reply, so it
    may land after a later change back to that status (running, paused, running). Each purge
    request is captured on its way and sent again once the run has settled, as if it landed
    late: bounded by the position of the entry written with it, it takes nothing newer."""
    world = await open_nats_world()
    nc, index = world._log._nc, world._listing.runs()
    sent: list[tuple[str, bytes]] = []

    async def capture(msg: Any) -> None:
        sent.append((msg.subject, msg.data))

    sub = await nc.subscribe(f"$JS.API.STREAM.PURGE.{index.stream}", cb=capture)
    run_id = new_run_id()
    await world.append(run_id, _created(), expected_seq=0)
    await world.append(run_id, [NewEvent(EventType.RUN_STARTED, data={})], expected_seq=1)
    seq = 2
    for _ in range(3):
        await world.append(run_id, [NewEvent(EventType.RUN_PAUSED, data={})], expected_seq=seq)
        await world.append(
            run_id, [NewEvent(EventType.RUN_UNPAUSED, data={})], expected_seq=seq + 1
        )
        seq += 2
    assert await world.flush_runs_index()
    await nc.flush()  # the last purge has come back to the capture
    await sub.unsubscribe()
    status = world._events().cached_info(run_id).status
    assert await _named(world) == {run_id: status}
    for subject, data in sent:  # every purge lands again, late
        await nc.request(subject, data, timeout=5)
    assert await _named(world) == {run_id: status}
    assert await world.count_runs(workflow=_WF) == {status: 1}


async def test_a_corrupt_run_does_not_keep_the_index_reconciling(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    index = world._listing.runs()
    await world.append(new_run_id(), _created(), expected_seq=0)
    broken = new_run_id()
    await world._log._js.publish(
        world.names.run_subject(broken), b"not an event", stream=world.names.events_stream
    )
    await world.runs_page(after=None, limit=10)  # reconciles: the corrupt run is not indexed
    index._reconciled_at -= runs_index.RECONCILE_EVERY  # past the throttle, not the minute
    assert not await index.needs_reconciling(world.names.events_stream)


async def test_a_failed_repair_does_not_fail_the_read(open_nats_world: OpenWorlds) -> None:
    """Repairs are derived data written on a read: an index that refuses writes (here a
    sealed stream) leaves the read as the logs have it."""
    world = await open_nats_world()
    run_id = new_run_id()
    await world.append(run_id, _created(), expected_seq=0)
    await world._events().append(run_id, _completed(), 1)  # its index write was lost
    js, index = world._log._js, world._listing.runs()
    assert await world.flush_runs_index()
    config = (await js.stream_info(index.stream)).config
    config.sealed = True
    await js.update_stream(config)
    page = await world.runs_page(after=None, limit=10, workflow=_WF)
    assert [(r.run_id, r.status) for r in page] == [(run_id, RunStatus.COMPLETED)]


async def test_a_deleted_run_leaves_no_entry_whatever_its_id(open_nats_world: OpenWorlds) -> None:
    """A cleanup purges a run's entries by its status-wildcarded subject (the run as its log
    has it), a hashed id included."""
    world = await open_nats_world()
    index = world._listing.runs()
    ids = [new_run_id(), "d" * 125]
    for run_id in ids:
        await world.append(run_id, _created(), expected_seq=0)
        await world.append(run_id, _completed(), expected_seq=1)
    await _named_settled(world, 2)
    assert await world.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED]) == 2
    assert await index.subjects(index.stream, f"{world.names.prefix}.ri.>") == []


async def _named_settled(world: Any, count: int) -> None:
    """Wait (bounded) until the index names ``count`` subjects: the purges of old statuses
    wait for no reply."""
    index = world._listing.runs()
    for _ in range(100):
        if len(await index.subjects(index.stream, f"{world.names.prefix}.ri.>")) == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the index does not settle at {count} entries")
