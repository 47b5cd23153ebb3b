"""World contract: the event log. Runs unchanged on every world."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.errors import (
    EntityConflictError,
    EntityMissingError,
    HookTokenConflictError,
    RunNotFoundError,
    RunTerminalError,
    SequenceConflictError,
)
from wayline.world import World


async def _new_run(world: World, workflow: str = "wf") -> str:
    run_id = new_run_id()
    await world.append(
        run_id,
        [NewEvent(T.RUN_CREATED, data={"workflow": workflow, "input": [1, "a"]})],
        expected_seq=0,
    )
    return run_id


async def test_sequence_is_dense_and_time_is_stamped_by_the_world(world: World) -> None:
    before = time.time()
    run_id = await _new_run(world)
    events = await world.append(
        run_id,
        [NewEvent(T.RUN_STARTED), NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})],
    )
    events += await world.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 1})])
    listed = await world.list_events(run_id)
    assert [e.seq for e in listed] == [1, 2, 3, 4]
    assert [e.seq for e in events] == [2, 3, 4]
    assert [e.type for e in listed] == [
        T.RUN_CREATED,
        T.RUN_STARTED,
        T.STEP_CREATED,
        T.STEP_STARTED,
    ]
    stamps = [e.created_at for e in listed]
    assert stamps == sorted(stamps)
    assert before - 5 <= stamps[0] <= time.time() + 5
    assert [e.seq for e in await world.list_events(run_id, after_seq=2)] == [3, 4]
    assert listed[2].data == {"stepName": "a", "input": []}


async def test_run_view_follows_the_log(world: World) -> None:
    run_id = await _new_run(world, "orders")
    info = await world.get_run(run_id)
    assert info is not None and info.status is RunStatus.PENDING and info.workflow == "orders"
    assert info.input == [1, "a"]
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": {"ok": True}})])
    info = await world.get_run(run_id)
    assert info is not None and info.status is RunStatus.COMPLETED
    assert info.output == {"ok": True} and info.last_seq == 3 and info.ended_at is not None
    assert await world.get_run(new_run_id()) is None
    runs = await world.list_runs(status=RunStatus.COMPLETED)
    assert [r.run_id for r in runs] == [run_id]
    assert await world.list_runs(status=RunStatus.RUNNING) == []
    assert [r.run_id for r in await world.list_runs(workflow="orders")] == [run_id]


async def test_a_run_and_its_log_read_together_agree(make_world: Any) -> None:
    """``read_run`` (what a delivery drives from) gives what ``get_run`` and ``list_events``
    give, also to a second instance that wrote nothing (its first read) and after more
    appends (a catch-up); an unknown run is ``(None, [])``, an ended one has no events."""
    writer, reader = await make_world(), await make_world()
    run_id = await _new_run(writer, "orders")
    await writer.append(run_id, [NewEvent(T.RUN_STARTED)])
    for world in (writer, reader):
        info, events = await world.read_run(run_id)
        assert info == await world.get_run(run_id)
        assert events == await world.list_events(run_id)
        assert info is not None and info.last_seq == 2 and [e.seq for e in events] == [1, 2]
    await writer.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 5})])
    info, events = await reader.read_run(run_id)
    assert info is not None and info.status is RunStatus.COMPLETED and info.output == 5
    assert events == []  # an ended run: a late message needs its status only
    assert [e.type for e in await reader.list_events(run_id)] == [
        T.RUN_CREATED,
        T.RUN_STARTED,
        T.RUN_COMPLETED,
    ]
    assert await reader.read_run(new_run_id()) == (None, [])


async def test_a_run_and_the_events_after_a_seq_read_together(make_world: Any) -> None:
    """``read_run_after`` (what a wake that goes on from a live replay drives from) gives the
    run and only the events after the seq, also to an instance that wrote nothing and after a
    catch-up; an unknown run is ``(None, [])``, an ended one has no events."""
    writer, reader = await make_world(), await make_world()
    run_id = await _new_run(writer, "orders")
    await writer.append(run_id, [NewEvent(T.RUN_STARTED), NewEvent(T.WAIT_CREATED, "w1")])
    for world in (writer, reader):
        info, events = await world.read_run_after(run_id, 1)
        assert info == await world.get_run(run_id)
        assert [e.seq for e in events] == [2, 3] and events == await world.list_events(run_id, 1)
        assert (await world.read_run_after(run_id, 3))[1] == []
    await writer.append(run_id, [NewEvent(T.WAIT_COMPLETED, "w1")])
    info, events = await reader.read_run_after(run_id, 2)
    assert info is not None and info.last_seq == 4
    assert [(e.seq, e.type) for e in events] == [(3, T.WAIT_CREATED), (4, T.WAIT_COMPLETED)]
    await writer.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 5})])
    info, events = await reader.read_run_after(run_id, 4)
    assert info is not None and info.status is RunStatus.COMPLETED and events == []
    assert await reader.read_run_after(new_run_id(), 0) == (None, [])


async def test_a_page_of_the_log_is_the_events_after_a_seq_up_to_a_limit(
    make_world: Any,
) -> None:
    """``events_page`` (the console's ``/events``) gives what ``list_events`` gives after the
    seq, cut at ``limit``, also to an instance that wrote nothing and after a catch-up; pages
    from cursor to cursor give the log once and in order; an unknown run has none."""
    writer, reader = await make_world(), await make_world()
    run_id = await _new_run(writer, "pages")
    await writer.append(run_id, [NewEvent(T.RUN_STARTED)])
    for n in range(5):
        await writer.append(run_id, [NewEvent(T.WAIT_CREATED, f"w{n}")])
    for world in (writer, reader):
        every = await world.list_events(run_id)
        assert [e.seq for e in every] == list(range(1, 8))
        assert await world.events_page(run_id, 0, 3) == every[:3]
        assert await world.events_page(run_id, 2, 2) == every[2:4]
        assert await world.events_page(run_id, 5, 10) == every[5:]
        assert await world.events_page(run_id, 7, 10) == []
        assert await world.events_page(run_id, 0, 0) == []
        walked, after = [], 0
        while page := await world.events_page(run_id, after, 2):
            walked += page
            after = page[-1].seq
        assert walked == every
    await writer.append(run_id, [NewEvent(T.WAIT_COMPLETED, "w0")])
    assert [e.seq for e in await reader.events_page(run_id, 6, 5)] == [7, 8]
    assert await reader.events_page(new_run_id(), 0, 5) == []


async def _unwinding_run(world: World) -> str:
    """A run that is being compensated (cancelled)."""
    run_id = await _new_run(world)
    unwinding = [
        NewEvent(T.RUN_STARTED),
        NewEvent(T.RUN_CANCEL_REQUESTED, data={"reason": "no"}),
        NewEvent(T.RUN_COMPENSATING, data={"reason": "cancelled"}),
    ]
    await world.append(run_id, unwinding)
    return run_id


async def test_a_lifted_block_gives_the_run_back_the_status_it_was_put_over(
    make_world: Any,
) -> None:
    """A run blocked while it unwinds (a divergence set aside, a worker with another
    definition) is unwinding again once the block is lifted: its stored status is
    ``compensating``, it cannot complete, and a reversal that failed for good parks it. A
    block while it is parked is lifted back to ``compensation_stuck``, where a person's resume
    is taken. Each lift is judged by an instance that did not write the block."""
    first, second = await make_world(), await make_world()
    run_id = await _unwinding_run(first)
    diverged = {"code": "REPLAY_DIVERGENCE", "message": "set aside"}
    blocked = await first.append(run_id, [NewEvent(T.RUN_BLOCKED, data=diverged)])
    other = {"code": "DEFINITION_MISMATCH", "message": "another definition"}
    await first.append(run_id, [NewEvent(T.RUN_BLOCKED, data=other)])  # a block over a block
    lifted = await second.append(run_id, [NewEvent(T.RUN_UNBLOCKED)])
    for world in (first, second):
        info, events = await world.read_run(run_id)
        assert info is not None and info.status is RunStatus.COMPENSATING and info.error is None
        assert [r.run_id for r in await world.list_runs(status=RunStatus.COMPENSATING)] == [run_id]
        assert await world.list_runs(status=RunStatus.RUNNING) == []
        assert events[-1].data == lifted[0].data == {"status": "compensating"}
    assert blocked[0].data == {**diverged, "statusBefore": "compensating"}
    with pytest.raises(EntityConflictError, match="compensating run cannot complete"):
        await first.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    stuck = {"step": "a", "stepId": "s1", "error": {"message": "offline"}}
    await first.append(run_id, [NewEvent(T.RUN_COMPENSATION_STUCK, data=stuck)])
    await second.append(run_id, [NewEvent(T.RUN_BLOCKED, data=other)])
    await first.append(run_id, [NewEvent(T.RUN_UNBLOCKED)])
    info = await second.get_run(run_id)
    assert info is not None and info.status is RunStatus.COMPENSATION_STUCK
    await second.append(run_id, [NewEvent(T.RUN_COMPENSATION_RESUMED)])
    info = await first.get_run(run_id)
    assert info is not None and info.status is RunStatus.COMPENSATING


async def test_a_blocked_run_is_judged_by_the_status_under_its_block(make_world: Any) -> None:
    """A run blocked while it unwinds cannot complete and is not started again, whichever
    instance is asked (one that did not write the block, one that did, in the block's own
    batch), and nothing of a refused append is written. A run blocked before it started (a
    concurrency slot, a worker with its definition) is started; one blocked while it runs can
    complete. Both refused appends were accepted of any blocked run."""
    first, second = await make_world(), await make_world()
    run_id = await _unwinding_run(first)
    other = {"code": "DEFINITION_MISMATCH", "message": "another definition"}
    completed = NewEvent(T.RUN_COMPLETED, data={"output": 1})
    for then in (completed, NewEvent(T.RUN_STARTED)):
        with pytest.raises(EntityConflictError):
            await first.append(run_id, [NewEvent(T.RUN_BLOCKED, data=other), then])
    await first.append(run_id, [NewEvent(T.RUN_BLOCKED, data=other)])
    under = r" \(it is blocked over compensating\)"
    for world in (second, first):
        with pytest.raises(EntityConflictError, match="cannot complete" + under):
            await world.append(run_id, [completed])
        with pytest.raises(EntityConflictError, match="already started" + under):
            await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    info, events = await second.read_run(run_id)
    assert info is not None and info.status is RunStatus.BLOCKED and len(events) == 5
    await second.append(run_id, [NewEvent(T.RUN_UNBLOCKED)])
    assert (await first.get_run(run_id)).status is RunStatus.COMPENSATING  # type: ignore[union-attr]

    waiting = {"code": "CONCURRENCY_LIMIT", "message": "waiting for a slot"}
    pending = await _new_run(first)
    await first.append(pending, [NewEvent(T.RUN_BLOCKED, data=waiting)])
    await second.append(pending, [NewEvent(T.RUN_STARTED)])
    await second.append(pending, [NewEvent(T.RUN_BLOCKED, data=other)])
    await first.append(pending, [completed])
    assert (await second.get_run(pending)).status is RunStatus.COMPLETED  # type: ignore[union-attr]


async def test_nothing_is_appended_to_a_terminal_run(world: World) -> None:
    run_id = await _new_run(world)
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    await world.append(run_id, [NewEvent(T.RUN_CANCELLED, data={"reason": "test"})])
    with pytest.raises(RunTerminalError):
        await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    with pytest.raises(RunTerminalError):
        await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {"stepName": "a"})])
    assert len(await world.list_events(run_id)) == 3


async def test_one_terminal_step_event_wins(world: World) -> None:
    run_id = await _new_run(world)
    await world.append(run_id, [NewEvent(T.RUN_STARTED), NewEvent(T.STEP_CREATED, "s1", {})])
    await world.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 1})])
    await world.append(run_id, [NewEvent(T.STEP_COMPLETED, "s1", {"result": 1})])
    with pytest.raises(EntityConflictError):
        await world.append(run_id, [NewEvent(T.STEP_COMPLETED, "s1", {"result": 2})])
    with pytest.raises(EntityConflictError):
        await world.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 2})])
    with pytest.raises(EntityConflictError):
        await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})])
    with pytest.raises(EntityMissingError):
        await world.append(run_id, [NewEvent(T.STEP_COMPLETED, "s9", {"result": 2})])
    with pytest.raises(RunNotFoundError):
        await world.append(new_run_id(), [NewEvent(T.RUN_STARTED)])


async def test_concurrent_terminal_writes_have_exactly_one_winner(make_world) -> None:  # type: ignore[no-untyped-def]
    worlds = [await make_world() for _ in range(3)]
    run_id = await _new_run(worlds[0])
    await worlds[0].append(run_id, [NewEvent(T.RUN_STARTED), NewEvent(T.STEP_CREATED, "s1", {})])

    async def finish(w: World, i: int) -> bool:
        try:
            await w.append(run_id, [NewEvent(T.STEP_COMPLETED, "s1", {"result": i})])
            return True
        except EntityConflictError:
            return False

    wins = await asyncio.gather(*(finish(worlds[i % 3], i) for i in range(12)))
    assert sum(wins) == 1
    terminal = [e for e in await worlds[1].list_events(run_id) if e.type is T.STEP_COMPLETED]
    assert len(terminal) == 1


async def test_a_batch_is_atomic(world: World) -> None:
    run_id = await _new_run(world)
    await world.append(run_id, [NewEvent(T.RUN_STARTED), NewEvent(T.STEP_CREATED, "s1", {})])
    with pytest.raises(EntityConflictError):
        await world.append(
            run_id, [NewEvent(T.STEP_CREATED, "s2", {}), NewEvent(T.STEP_CREATED, "s1", {})]
        )
    assert [e.correlation_id for e in await world.list_events(run_id)] == [None, None, "s1"]
    await world.append(run_id, [NewEvent(T.STEP_CREATED, "s2", {})])


async def test_expected_sequence_fences_stale_writers(world: World) -> None:
    run_id = await _new_run(world)
    with pytest.raises(SequenceConflictError):
        await world.append(run_id, [NewEvent(T.RUN_STARTED)], expected_seq=0)
    await world.append(run_id, [NewEvent(T.RUN_STARTED)], expected_seq=1)
    with pytest.raises(EntityConflictError):
        await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "x"})])
    with pytest.raises(SequenceConflictError):
        await world.append(
            run_id, [NewEvent(T.WAIT_CREATED, "w1", {"resumeAt": 1.0})], expected_seq=1
        )
    assert len(await world.list_events(run_id)) == 2


async def _paused_with_steps_started(world: World, *cids: str) -> str:
    """A running run with each of ``cids`` created and started, then paused."""
    run_id = await _new_run(world)
    events = [NewEvent(T.RUN_STARTED)]
    for cid in cids:
        events.append(NewEvent(T.STEP_CREATED, cid, {"stepName": cid, "input": []}))
        events.append(NewEvent(T.STEP_STARTED, cid, {"attempt": 1}))
    await world.append(run_id, events)
    paused = {"reason": "by a person", "statusBefore": "running"}
    await world.append(run_id, [NewEvent(T.RUN_PAUSED, data=paused)])
    return run_id


async def test_no_step_attempt_starts_over_a_pause(world: World) -> None:
    """A worker that read the log before a pause (owned recovery re-stamping a step whose
    delivery died mid-body) must not start an attempt in the paused run: the world refuses
    the start, takes the body's end, and takes a start again once the run is unpaused."""
    run_id = await _paused_with_steps_started(world, "s1", "s2")
    with pytest.raises(EntityConflictError, match="paused; no step attempt starts"):
        await world.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 2})])
    await world.append(run_id, [NewEvent(T.STEP_COMPLETED, "s2", {"result": 1})])
    await world.append(run_id, [NewEvent(T.RUN_UNPAUSED, data={"status": "running"})])
    await world.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 2})])
    listed = await world.list_events(run_id)
    assert [e.type for e in listed][-4:] == [
        T.RUN_PAUSED,
        T.STEP_COMPLETED,
        T.RUN_UNPAUSED,
        T.STEP_STARTED,
    ]
    info = await world.get_run(run_id)
    assert info is not None and info.status is RunStatus.RUNNING


async def test_hook_tokens_are_unique_among_active_hooks(world: World) -> None:
    a, b = await _new_run(world), await _new_run(world)
    for run in (a, b):
        await world.append(run, [NewEvent(T.RUN_STARTED)])
    await world.append(a, [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:42"})])
    with pytest.raises(HookTokenConflictError):
        await world.append(b, [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:42"})])
    hook = await world.get_hook("approve:42")
    assert hook is not None and hook.run_id == a and hook.correlation_id == "h1" and hook.active
    assert await world.get_hook("nope") is None
    await world.append(a, [NewEvent(T.HOOK_RECEIVED, "h1", {"payload": {"ok": 1}})])
    # a terminal run releases its hooks' tokens
    await world.append(a, [NewEvent(T.RUN_COMPLETED, data={"output": None})])
    old = await world.get_hook("approve:42")
    assert old is not None and not old.active
    await world.append(b, [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:42"})])
    hook = await world.get_hook("approve:42")
    assert hook is not None and hook.run_id == b and hook.active


async def test_a_hook_token_conflict_names_the_run_holding_it(world: World) -> None:
    a, b = await _new_run(world), await _new_run(world)
    for run in (a, b):
        await world.append(run, [NewEvent(T.RUN_STARTED)])
    await world.append(a, [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:7"})])
    with pytest.raises(HookTokenConflictError) as other:
        await world.append(b, [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:7"})])
    assert other.value.holder == a and other.value.token == "approve:7"
    assert other.value.message == (
        f"hook token 'approve:7' is held by another active hook, of run {a}"
    )
    with pytest.raises(HookTokenConflictError) as same:  # a second hook of the holder's run
        await world.append(a, [NewEvent(T.HOOK_CREATED, "h2", {"token": "approve:7"})])
    assert same.value.holder == a and f"of run {a} (this run)" in same.value.message
    twice = [NewEvent(T.HOOK_CREATED, c, {"token": "twice"}) for c in ("h2", "h3")]
    with pytest.raises(HookTokenConflictError) as batch:  # twice in one batch
        await world.append(b, twice)
    assert batch.value.holder == b and f"of run {b} (this run)" in batch.value.message
    assert await world.get_hook("twice") is None  # nothing of the batch was written


async def test_owner_message_id_survives_storage(world: World) -> None:
    run_id = await _new_run(world)
    await world.append(
        run_id,
        [
            NewEvent(T.RUN_STARTED),
            NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": {"args": [1]}}),
            NewEvent(T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "77"}),
        ],
    )
    events = await world.list_events(run_id)
    assert events[2].data == {"stepName": "a", "input": {"args": [1]}}
    assert events[3].data["ownerMessageId"] == "77"


async def test_runs_mark_rises_when_a_run_is_created_or_changes_status(world: World) -> None:
    before = await world.runs_mark()
    run_id = await _new_run(world)
    created = await world.runs_mark()
    await world.append(run_id, [NewEvent(T.RUN_STARTED)], expected_seq=1)
    started = await world.runs_mark()
    # every world of the suite tells it: a look at the runs can be skipped on all of them
    assert before is not None and created is not None and started is not None
    assert before < created < started


async def test_a_batch_carrying_a_start_over_a_pause_is_refused_whole(world: World) -> None:
    """A batch whose start is refused over a pause writes none of its events: the completion
    it carried is not half-applied, and the log reads as it did before the batch."""
    run_id = await _paused_with_steps_started(world, "s1")
    before = await world.list_events(run_id)
    with pytest.raises(EntityConflictError, match="paused; no step attempt starts"):
        await world.append(
            run_id,
            [
                NewEvent(T.STEP_COMPLETED, "s1", {"result": 1}),
                NewEvent(T.STEP_CREATED, "s2", {"stepName": "b", "input": []}),
                NewEvent(T.STEP_STARTED, "s2", {"attempt": 1}),
            ],
        )
    assert [e.seq for e in await world.list_events(run_id)] == [e.seq for e in before]
    info = await world.get_run(run_id)
    assert info is not None and info.status is RunStatus.PAUSED
