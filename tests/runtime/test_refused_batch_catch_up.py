"""A failure the world found in a decision batch, carried out when the log has moved on.

The delivery plans ``planning.fail_move`` on the replay its refused batch was decided on; by
the time it writes the move, another writer may have begun the run's unwind, paused it or
ended it. The move's write is then refused, the delivery reads the log again (the catch-up)
and plans from what it finds, writing nothing of its own. The run's log up to the refusal is
the recorded golden history of ``golden.conflict_after_a_step`` (a reservation completed),
written to a real world under a new run id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.golden import workflows
from tests.runtime.harness import Engine, settings
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline._core.planning import BeginFailedUnwind, FailNow, RunFailure, fail_move
from wayline._core.replay import Replay
from wayline._engine import unwind
from wayline._engine.messages import Stats
from wayline._engine.session import RunSession
from wayline.world import Delivery, World

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "decisions.jsonl"
CASE = "hook-conflict-after-a-step-begins-the-unwind"
FAILURE = RunFailure(
    "HOOK_CONFLICT",
    "hook token 'refused-batch-catch-up' is held by another active hook, of run wf_holder",
    {"token": "refused-batch-catch-up", "holderRunId": "wf_holder"},
)


async def _recorded_run(world: World) -> str:
    """The golden history's events, written to ``world`` as a new run: a completed step."""
    line = next(
        raw
        for raw in map(json.loads, GOLDEN.read_text(encoding="utf-8").splitlines())
        if raw["case"] == CASE
    )
    run_id = new_run_id()
    for event in line["events"]:
        new = NewEvent(EventType(event["type"]), event["correlationId"], event["data"])
        await world.append(run_id, [new], expected_seq=event["seq"] - 1)
    return run_id


@asynccontextmanager
async def _refused(world: World) -> AsyncIterator[tuple[RunSession, BeginFailedUnwind]]:
    """A delivery's session on the recorded run, and the move the planner names for the
    refusal of its batch: begin the unwind (a step to reverse)."""
    run_id = await _recorded_run(world)
    replay = Replay(workflows.conflict_after_a_step, run_id)
    try:
        replay.feed(await world.list_events(run_id))
        delivery = Delivery("flow", "refused-batch-m-1", 1, {"runId": run_id}, b"")  # type: ignore[arg-type]
        session = RunSession(
            world, settings(), replay, delivery, backstop=None, stats=Stats(), protected=set()
        )
        move = fail_move(replay, FAILURE)
        assert isinstance(move, BeginFailedUnwind)
        yield session, move
    finally:
        replay.close()


async def test_an_unwind_another_writer_began_first_is_caught_up_not_begun_twice(
    engine: Engine,
) -> None:
    world = engine.world
    async with _refused(world) as (session, move):
        other: dict[str, Any] = {"reason": "failed", "error": {"message": "another writer"}}
        await world.append(session.run_id, [NewEvent(EventType.RUN_COMPENSATING, data=other)])
        before = await world.list_events(session.run_id)
        assert await unwind.carry_out(session, move)  # the handler plans again
        assert await world.list_events(session.run_id) == before  # nothing written twice
        assert session.replay.ending.phase == "compensating"  # caught up from the log
        assert session.replay.ending.why == other


async def test_a_pause_that_came_first_refuses_the_unwind_and_is_caught_up(
    engine: Engine,
) -> None:
    world = engine.world
    async with _refused(world) as (session, move):
        assert await engine.client.pause(session.run_id, "a person looks at it")
        before = await world.list_events(session.run_id)
        assert await unwind.carry_out(session, move)
        after = await world.list_events(session.run_id)
        assert after == before
        assert EventType.RUN_COMPENSATING not in [e.type for e in after]
        assert session.replay.ending.paused  # the next turn plans Paused


async def test_a_run_ended_meanwhile_takes_no_end_of_the_refusal(engine: Engine) -> None:
    world = engine.world
    async with _refused(world) as (session, move):
        ended = NewEvent(EventType.RUN_CANCELLED, data={"reason": "stop", "terminated": True})
        await world.append(session.run_id, [ended])
        before = await world.list_events(session.run_id)
        assert await unwind.carry_out(session, move)
        assert await world.list_events(session.run_id) == before
        assert session.replay.terminal is not None
        now = FailNow(FAILURE, [NewEvent(EventType.RUN_FAILED, data={"error": FAILURE.error()})])
        assert not await unwind.carry_out(session, now)  # the delivery is done with the run
        assert await world.list_events(session.run_id) == before
