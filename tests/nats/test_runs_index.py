"""The JetStream world's runs index against a real nats-server: it names each run once, with
the status its log has; a writer that died between its append and its index write (the append
made on the event log alone) leaves nothing wrong on the next page, and a world provisioned
before the index builds it on the first read."""

from __future__ import annotations

import asyncio
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
    index = world._runs()
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
    index = world._runs()
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
