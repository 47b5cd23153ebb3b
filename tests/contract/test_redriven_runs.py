"""World contract: a redrive is the one append a terminal run takes. A failed run takes a
``run_redriven`` of its failed step and is running again, its step pending for a fresh
attempt, on the world that wrote it and on another instance that had read the run ended; any
other run, or a step that did not fail, refuses it. Runs unchanged on every world."""

from __future__ import annotations

from typing import Any

import pytest

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.errors import EntityConflictError
from wayline.world import World


async def _failed_run(world: World) -> str:
    run_id = new_run_id()
    events = [
        NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": []}),
        NewEvent(T.RUN_STARTED),
        NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []}),
        NewEvent(T.STEP_CREATED, "s2", {"stepName": "b", "input": []}),
        NewEvent(T.STEP_COMPLETED, "s1", {"result": 1}),
        NewEvent(T.STEP_FAILED, "s2", {"error": {"message": "declined"}}),
        NewEvent(T.RUN_FAILED, data={"error": {"message": "declined"}}),
    ]
    await world.append(run_id, events, expected_seq=0)
    return run_id


def _redrive(cid: str) -> NewEvent:
    return NewEvent(T.RUN_REDRIVEN, cid, {"by": "alice", "reason": "fixed", "stepId": cid})


async def test_a_failed_run_is_running_again_after_its_redrive(make_world: Any) -> None:
    writer, reader = await make_world(), await make_world()
    run_id = await _failed_run(writer)
    ended, _ = await reader.read_run(run_id)  # the reader holds the run as ended
    assert ended is not None and ended.status is RunStatus.FAILED and ended.ended_at is not None
    await writer.append(run_id, [_redrive("s2")], expected_seq=7)
    for world in (writer, reader):
        info, events = await world.read_run(run_id)
        assert info is not None and info.status is RunStatus.RUNNING
        assert info.ended_at is None and info.error is None
        assert [e.type for e in events][-2:] == [T.RUN_FAILED, T.RUN_REDRIVEN]
    # the step is pending again: a fresh attempt starts, and the run ends once more
    await reader.append(run_id, [NewEvent(T.STEP_STARTED, "s2", {"attempt": 1})])
    await reader.append(run_id, [NewEvent(T.STEP_COMPLETED, "s2", {"result": 2})])
    await reader.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": [1, 2]})])
    info = await writer.get_run(run_id)
    assert info is not None and info.status is RunStatus.COMPLETED and info.output == [1, 2]


async def test_only_a_failed_run_and_its_failed_step_take_a_redrive(world: World) -> None:
    run_id = await _failed_run(world)
    with pytest.raises(EntityConflictError, match="step s1 is completed, not failed"):
        await world.append(run_id, [_redrive("s1")])
    await world.append(run_id, [_redrive("s2")])
    with pytest.raises(EntityConflictError, match="run is running; only a failed run"):
        await world.append(run_id, [_redrive("s2")])
    assert [e.type for e in await world.list_events(run_id)][-1] is T.RUN_REDRIVEN
    assert len(await world.list_events(run_id)) == 8
