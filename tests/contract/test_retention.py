"""World contract: cleanup and archive (seed 004, "Persistence")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.archived_runs import long_archived_run
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.world import World


async def _run(world: World, end: T | None) -> str:
    run_id = new_run_id()
    await world.append(
        run_id,
        [
            NewEvent(T.RUN_CREATED, data={"workflow": "w", "input": None}),
            NewEvent(T.RUN_STARTED),
            NewEvent(T.HOOK_CREATED, "h1", {"token": f"tok-{run_id}"}),
        ],
    )
    await world.enqueue("flow", {"runId": run_id}, delay_seconds=600)  # a far-off wake
    if end is T.RUN_COMPLETED:
        await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    elif end is not None:
        await world.append(run_id, [NewEvent(end, data={"error": {}, "reason": "x"})])
    return run_id


async def test_cleanup_zero_takes_every_terminal_run_even_this_millisecond(world: World) -> None:
    done = await _run(world, T.RUN_COMPLETED)
    failed = await _run(world, T.RUN_FAILED)
    live = await _run(world, None)
    assert await world.delete_runs(older_than=0) == 2
    assert await world.get_run(done) is None and await world.get_run(failed) is None
    assert await world.list_events(done) == []
    assert await world.get_hook(f"tok-{done}") is None
    assert (await world.get_run(live)) is not None  # never a live run
    assert await world.delete_runs(older_than=0) == 0


async def test_cleanup_respects_age_and_status(world: World) -> None:
    done = await _run(world, T.RUN_COMPLETED)
    cancelled = await _run(world, T.RUN_CANCELLED)
    assert await world.delete_runs(older_than=3600) == 0
    assert await world.delete_runs(older_than=0, statuses=[RunStatus.COMPLETED]) == 1
    assert await world.get_run(done) is None
    assert (await world.get_run(cancelled)) is not None
    with pytest.raises(ValueError, match="terminal"):
        await world.delete_runs(older_than=0, statuses=[RunStatus.RUNNING])


async def test_cleanup_removes_the_runs_queued_wakes(world: World) -> None:
    await _run(world, T.RUN_COMPLETED)
    await world.delete_runs(older_than=0)
    # the 600 s wake went with its run: nothing is due, even much later
    assert await world.receive("flow", wait_seconds=0.2) == []


async def test_archive_moves_runs_in_batches(world: World) -> None:
    runs = [await _run(world, T.RUN_COMPLETED) for _ in range(5)]
    live = await _run(world, None)
    await asyncio.sleep(0.01)
    assert await world.archive_runs(older_than=0, limit=2) == 2
    assert await world.archived_count() == 2
    assert await world.archive_runs(older_than=0, limit=1000) == 3
    assert await world.archive_runs(older_than=0) == 0
    assert await world.archived_count() == 5
    for run_id in runs:
        assert await world.get_run(run_id) is None
    assert (await world.get_run(live)) is not None
    assert [r.run_id for r in await world.list_runs()] == [live]


async def test_an_archived_run_is_read_back_with_its_log(world: World) -> None:
    done = await _run(world, T.RUN_COMPLETED)
    live = await _run(world, None)
    assert await world.archive_runs(older_than=0) == 1
    assert await world.archived_run(live) is None  # not archived
    assert await world.archived_run(new_run_id()) is None
    found = await world.archived_run(done)
    if type(world).__name__ == "MemoryWorld":  # its archive only counts what it archives
        assert found is None
        return
    assert found is not None
    info, events = found
    assert (info.run_id, info.status, info.output) == (done, RunStatus.COMPLETED, 1)
    assert [e.type for e in events] == [
        T.RUN_CREATED,
        T.RUN_STARTED,
        T.HOOK_CREATED,
        T.RUN_COMPLETED,
    ]
    assert [e.seq for e in events] == [1, 2, 3, 4] and info.last_seq == 4


async def test_an_archived_runs_log_is_paged_by_cursor_after_a_restart(make_world: Any) -> None:
    writer = await make_world()
    run_id = await long_archived_run(writer, 250, "archpage")
    world = await make_world()  # another process, or the same after a restart
    if type(world).__name__ == "MemoryWorld":  # its archive only counts what it archives
        assert await world.archived_page(run_id, 0, 100) is None
        return
    assert await world.archived_page(new_run_id(), 0, 100) is None
    seen: list[int] = []
    after = 0
    while True:
        found = await world.archived_page(run_id, after, 100)
        assert found is not None
        last, page = found
        assert last == 253 and len(page) <= 100
        seen += [e.seq for e in page]
        if not page or page[-1].seq == last:
            break
        after = page[-1].seq
    assert seen == list(range(1, 254))  # in order, each once
    assert await world.archived_page(run_id, 253, 100) == (253, [])
    last, page = await world.archived_page(run_id, 10, 3) or (0, [])
    assert [(e.seq, e.type, e.correlation_id) for e in page] == [
        (11, T.STEP_CREATED, "archpage-8"),
        (12, T.STEP_CREATED, "archpage-9"),
        (13, T.STEP_CREATED, "archpage-10"),
    ]
