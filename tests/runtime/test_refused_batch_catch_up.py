"""A failure the world found in a decision batch, carried out when the log has moved on.

The delivery plans ``planning.fail_move`` on the replay its refused batch was decided on; by
the time it writes the move, another writer may have begun the run's unwind, paused it or
ended it. The move's write is then refused, the delivery reads the log again (the catch-up)
and plans from what it finds, writing nothing of its own. The run's log up to the refusal is
the recorded golden history of ``golden.conflict_after_a_step`` (a reservation completed),
written to a real world under a new run id.

The last tests let a real worker plan the move, and land a pause or a cancel between the
refusal and the move's write: the pause holds the run until its unpause (the unwind is not
begun over it), and the cancel does not begin a second unwind; either way each reversal runs
once and the attributes set in the refused batch are recorded once.

The catch-up is the world refusing a conditional write (a second ``run_compensating``, one over
a pause, an end over an ended run), so these tests run on every world, NATS included
(docs/testing.md, "The pyramid", rule 2), not on the engine-logic worlds alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WORLD_KINDS
from tests.golden import workflows
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.planning import BeginFailedUnwind, FailNow, RunFailure, fail_move
from wayline._core.replay import Replay
from wayline._engine import unwind
from wayline._engine.messages import Stats
from wayline._engine.session import RunSession
from wayline.errors import RunFailedError
from wayline.world import Delivery, World

EVERY_WORLD = ["local", "memory", *WORLD_KINDS[1:]]
"""Every world: the local and the memory world, and NATS (see the module's docstring)."""
pytestmark = pytest.mark.parametrize("make_world", EVERY_WORLD, indirect=True)

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


# --- a real worker plans the move; a pause or a cancel lands before its write ------------------


HOLDER, LATE = workflows.approval, workflows.conflict_after_a_step
"""The golden histories' runs: one holds the token, the other reserves, sets its stage and
asks for that token (its batch is refused)."""


@asynccontextmanager
async def _between_refusal_and_move(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, command: str
) -> AsyncIterator[str]:
    """Under a worker, run ``LATE`` into a refusal (``HOLDER`` holds the token) and, when the
    worker has planned its ``BeginFailedUnwind`` and before it writes it, ``pause`` or
    ``cancel`` the run through the client. Yields the run's id once that move is carried out."""
    real, carried = unwind.carry_out, asyncio.Event()

    async def carry_out(session: RunSession, move: Any) -> bool:
        if not isinstance(move, BeginFailedUnwind) or carried.is_set():
            return await real(session, move)
        if command == "pause":
            assert await engine.client.pause(session.run_id, "a person looks at it")
        else:
            assert await engine.client.cancel(session.run_id, "the customer changed their mind")
        try:
            return await real(session, move)
        finally:
            carried.set()

    monkeypatch.setattr(unwind, "carry_out", carry_out)
    token = f"refused-batch-{command}-{new_run_id()}"
    async with engine.worker([HOLDER, LATE]):
        await engine.client.start(HOLDER, token)  # holds the token to the end of the test

        async def held() -> bool:
            hook = await engine.world.get_hook(token)
            return hook is not None and hook.active

        await wait_for(held)
        late = await engine.client.start(LATE, "o2", token)
        await asyncio.wait_for(carried.wait(), timeout=20)
        yield late.run_id


async def _ended_failed_once(engine: Engine, run_id: str) -> list[Any]:
    """The run ends failed with the refusal's error, its reservation reversed once and the
    attributes of its refused batch recorded once; returns its log."""
    with pytest.raises(RunFailedError, match="HOOK_CONFLICT"):
        await engine.client.handle(run_id).result(timeout=20)
    events = await engine.world.list_events(run_id)
    assert len(of_type(events, EventType.RUN_COMPENSATING)) == 1  # one unwind, begun once
    tagged = [e.data for e in of_type(events, EventType.ATTRIBUTES_SET)]
    assert tagged == [{"set": {"stage": "awaiting-approval"}}]
    completed = [e.correlation_id for e in of_type(events, EventType.STEP_COMPLETED)]
    assert completed == ["s1", "s1.c0"]  # the reservation, then its reversal, each once
    return events


async def test_a_pause_before_the_refusals_unwind_holds_the_run_until_the_unpause(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _between_refusal_and_move(engine, monkeypatch, "pause") as run_id:
        info = await engine.client.get_run(run_id)
        assert info.status is RunStatus.PAUSED  # the unwind was not begun over the pause
        events = await engine.world.list_events(run_id)
        assert not of_type(events, EventType.RUN_COMPENSATING)
        assert not of_type(events, EventType.ATTRIBUTES_SET)  # recorded when the unwind begins
        assert await engine.client.unpause(run_id)
        await _ended_failed_once(engine, run_id)


async def test_a_cancel_before_the_refusals_unwind_begins_no_second_unwind(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _between_refusal_and_move(engine, monkeypatch, "cancel") as run_id:
        events = await _ended_failed_once(engine, run_id)
    # the failure was found before the cancel came: the run ends failed, not cancelled
    [begun] = of_type(events, EventType.RUN_COMPENSATING)
    assert begun.data["reason"] == "failed"
    assert begun.data["error"]["code"] == "HOOK_CONFLICT"
    assert of_type(events, EventType.RUN_CANCEL_REQUESTED)
