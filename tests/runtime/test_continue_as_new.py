"""``wayline.continue_as_new`` on every world: a run ends ``continued_as_new`` and its next run
goes on under the same identity; a handle follows the chain, a crash between the end and the
next run's creation creates the same next run, a business id moves to its next generation,
and a cancel reaches the chain's latest run."""

from __future__ import annotations

import io
import itertools
import uuid
from typing import Any

import pytest

import wayline
from tests.runtime import continue_as_new_flows as flows
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import render_show
from wayline.world.business_ids import generation_run_id


async def _chain(engine: Engine, run_id: str) -> list[wayline.RunInfo]:
    """The runs of ``run_id``'s chain, in order, as far as they are created."""
    chain = [await engine.client.get_run(run_id)]
    while chain[-1].continued_as is not None:
        info = await engine.world.get_run(chain[-1].continued_as)
        if info is None:
            break
        chain.append(info)
    return chain


async def test_a_chain_of_three_continuations_gives_its_last_result(engine: Engine) -> None:
    async with engine.worker([flows.can_counter]):
        handle = await engine.client.start(flows.can_counter, 1, 0, 4)
        first = handle.run_id
        assert await handle.result(timeout=30) == {"n": 4, "total": 10}
    chain = await _chain(engine, first)
    assert [str(r.status) for r in chain] == [*["continued_as_new"] * 3, "completed"]
    assert handle.first_run_id == first and handle.run_id == chain[-1].run_id
    for before, after in itertools.pairwise(chain):
        assert before.continued_as == after.run_id
        assert after.continued_from == before.run_id
        assert after.attributes["firstRunId"] == first
    # the search attribute set before each continue is the next run's from its start
    assert chain[-1].search_attributes == {"Reached": 3}
    # each run's log holds its own step only: the log starts anew
    for info in chain:
        events = await engine.world.list_events(info.run_id)
        assert len(of_type(events, EventType.STEP_CREATED)) == 1
    # a handle made later from the first run id follows the chain as well
    assert await engine.client.handle(first).result(timeout=5) == {"n": 4, "total": 10}


async def test_runs_show_and_list_link_the_chain(engine: Engine) -> None:
    async with engine.worker([flows.can_counter]):
        handle = await engine.client.start(flows.can_counter, 1, 0, 2)
        await handle.result(timeout=30)
    first, second = await _chain(engine, handle.first_run_id)
    shown = []
    for info in (first, second):
        out = io.StringIO()
        render_show(info, await engine.world.list_events(info.run_id), out)
        shown.append(out.getvalue())
    assert f"continued as new \u2192 {second.run_id}" in shown[0]
    assert f"continued from {first.run_id}" in shown[1]
    listed = {r.run_id: str(r.status) for r in await engine.client.list_runs()}
    assert listed[first.run_id] == "continued_as_new"
    assert listed[second.run_id] == "completed"


async def test_a_business_id_moves_to_its_next_generation(engine: Engine) -> None:
    bid = f"can-{uuid.uuid4().hex[:8]}"
    memo = {"owner": "tests"}
    async with engine.worker([flows.can_counter]):
        options = wayline.StartOptions(id=bid, memo=memo, attributes={"Tenant": "t1"})
        handle = await engine.client.start_with(options, flows.can_counter, 1, 0, 3)
        assert await handle.result(timeout=30) == {"n": 3, "total": 6}
    chain = await _chain(engine, generation_run_id(bid, None, 0))
    assert [r.run_id for r in chain] == [generation_run_id(bid, None, g) for g in range(3)]
    assert {r.business_id for r in chain} == {bid}
    assert all(r.attributes.get("memo") == memo for r in chain)
    assert chain[-1].search_attributes == {"Tenant": "t1", "Reached": 2}
    # the business id names the chain's latest run; a start under it finds that chain
    assert (await engine.client.get_run(bid)).run_id == chain[-1].run_id
    again = await engine.client.start_with(wayline.StartOptions(id=bid), flows.can_counter, 9, 0, 9)
    assert again.run_id == chain[-1].run_id


async def test_a_crash_between_the_end_and_the_next_run_creates_the_same_next_run(
    engine: Engine,
) -> None:
    """The delivery that wrote the end dies before the next run's ``run_created``: its
    redelivery finds the run ended and creates the run the end names, once."""
    world = engine.world
    original = world.append
    crashed: list[str] = []

    async def crashing(run_id: str, events: Any, *, expected_seq: Any = None) -> Any:
        first = events[0]
        if first.type is EventType.RUN_CREATED and "continuedFrom" in first.data and not crashed:
            crashed.append(run_id)
            raise wayline.WorldUnavailableError("simulated crash before the next run")
        return await original(run_id, events, expected_seq=expected_seq)

    world.append = crashing  # type: ignore[method-assign]
    async with engine.worker([flows.can_counter]):
        handle = await engine.client.start(flows.can_counter, 1, 0, 2)
        assert await handle.result(timeout=30) == {"n": 2, "total": 3}
    first, second = await _chain(engine, handle.first_run_id)
    assert crashed == [second.run_id]  # the run the end named is the one created after
    ends = of_type(await world.list_events(first.run_id), EventType.RUN_CONTINUED_AS_NEW)
    assert [e.data["nextRunId"] for e in ends] == [second.run_id]
    assert len(await world.list_runs(workflow="can_counter")) == 2


async def test_a_cancel_of_the_first_handle_cancels_the_latest_run(engine: Engine) -> None:
    async with engine.worker([flows.can_then_sleeps]):
        handle = await engine.client.start(flows.can_then_sleeps, False)
        first = handle.run_id

        async def waiting() -> bool:
            chain = await _chain(engine, first)
            if len(chain) < 2:
                return False
            events = await engine.world.list_events(chain[1].run_id)
            return bool(of_type(events, EventType.WAIT_CREATED))

        await wait_for(waiting, timeout=20)
        assert await handle.cancel("enough") is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    first_run, second = await _chain(engine, first)
    assert str(first_run.status) == "continued_as_new"
    assert str(second.status) == "cancelled"
    assert handle.run_id == second.run_id


async def test_an_except_exception_does_not_swallow_the_continue(engine: Engine) -> None:
    async with engine.worker([flows.can_catches]):
        handle = await engine.client.start(flows.can_catches, False)
        assert await handle.result(timeout=20) == "second"


async def test_a_continue_with_a_child_running_fails_the_run_clearly(engine: Engine) -> None:
    """Refused, as Temporal refuses it: the child's end would have no run to report to. The
    run fails as any run failing with a child still running does (its unwind then waits on
    the child), with the error's code saying why."""
    async with engine.worker([flows.can_with_child, flows.can_kid]):
        handle = await engine.client.start(flows.can_with_child)

        async def failed() -> list[Any]:
            events = await engine.world.list_events(handle.run_id)
            return of_type(events, EventType.RUN_COMPENSATING, EventType.RUN_FAILED)

        [event] = await wait_for(failed, timeout=30)
    assert event.data["error"]["code"] == "CONTINUE_AS_NEW_WITH_CHILDREN"
    assert (await engine.client.get_run(handle.run_id)).continued_as is None


async def test_every_run_of_a_chain_keeps_its_priority_and_a_fork_of_one_begins_no_chain(
    engine: Engine,
) -> None:
    """The run's place among ready work carries to each next run (and so to their messages
    and children); a fork of a continued run is a run of its own, not a continuation."""
    options = wayline.StartOptions(priority=1, fairness_key="acme", fairness_weight=2)
    async with engine.worker([flows.can_counter]):
        handle = await engine.client.start_with(options, flows.can_counter, 1, 0, 3)
        first = handle.run_id
        assert await handle.result(timeout=30) == {"n": 3, "total": 6}
        chain = await _chain(engine, first)
        assert {(r.ordering.priority, r.ordering.fairness_key) for r in chain} == {(1, "acme")}
        assert {r.ordering.fairness_weight for r in chain} == {2}
        fork = await engine.client.fork(chain[1].run_id, from_step="can_add")
        assert await fork.result(timeout=30) == {"n": 3, "total": 6}
    forked = await engine.client.get_run(fork.first_run_id)  # the fork continued in turn
    assert forked.continued_from is None and "forkedFrom" in forked.attributes
    assert "firstRunId" not in forked.attributes
