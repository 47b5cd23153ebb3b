"""Sagas (seed 004): compensation in reverse order, keys by direction, skip on recovery, and a
failed reversal that parks the run for a person."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType


async def test_failure_compensates_completed_steps_in_reverse(
    engine: Engine, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    async with engine.worker([flows.saga]):
        handle = await engine.client.start(flows.saga, log, "o1")
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await handle.result(timeout=15)
    rid = handle.run_id
    assert flows.lines(log) == [
        "reserve o1",
        f"charge o1 key={rid}:charge_card#0:forward",
        "ship o1",
        f"refund o1 key={rid}:charge_card#0:compensate fwd={rid}:charge_card#0:forward "
        "result=ch_o1",
        "release o1",
    ]
    events = await handle.events()
    assert [e.type for e in events][-1] is EventType.RUN_FAILED
    assert of_type(events, EventType.RUN_COMPENSATING)[0].data["reason"] == "failed"


async def test_a_step_given_as_a_compensation_reverses_its_forward_step(
    engine: Engine, tmp_path: Path
) -> None:
    """``compensate=`` a function that is a ``@wayline.step`` too: the handler is still the
    forward step's compensation (its own key, the forward key and result), not a copy of the
    other step (it was: no forward key, no forward result, the other step's name)."""
    compensation = flows.charge_with_step_refund.compensation
    assert compensation is not None
    assert compensation.name == "charge_with_step_refund:compensate"
    assert compensation.compensates is flows.charge_with_step_refund
    log = str(tmp_path / "log")
    async with engine.worker([flows.saga_step_refund]):
        handle = await engine.client.start(flows.saga_step_refund, log, "o2")
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await handle.result(timeout=15)
    rid, step = handle.run_id, "charge_with_step_refund#0"
    assert flows.lines(log) == [
        f"charge o2 key={rid}:{step}:forward",
        "ship o2",
        f"refund o2 key={rid}:{step}:compensate fwd={rid}:{step}:forward result=ch_o2",
    ]


async def test_a_cancel_while_a_retried_attempt_runs_compensates_and_ends(
    engine: Engine, tmp_path: Path
) -> None:
    """Cancelled while attempt 2 of a compensable step runs: the unwind waits for it, and when
    it fails (its retry would not start while the run unwinds) the run goes on: the step is
    compensated once and the run ends cancelled. It stayed ``compensating`` for ever: the
    retry's delivery saw the unwind and acknowledged itself without waking the run."""
    log = str(tmp_path / "log")
    async with engine.worker([flows.saga_retrying]):
        handle = await engine.client.start(flows.saga_retrying, log, "o3")
        await wait_for(_said(log, "attempt 2"), timeout=15)
        assert await engine.client.cancel(handle.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    lines = flows.lines(log)
    assert lines == ["attempt 1", "attempt 2", "undo o3 fwd=None"], lines


async def test_a_step_that_never_started_is_not_compensated(engine: Engine, tmp_path: Path) -> None:
    """Run B waits for the slot run A holds and is cancelled: B's step never started (and,
    once the unwind is recorded, never will), so there is nothing to undo: no compensation
    (a refund for a charge never made) and B ends cancelled; A completes."""
    log = str(tmp_path / "log")
    async with engine.worker([flows.saga_limited]):
        a = await engine.client.start(flows.saga_limited, log, "A")
        await wait_for(_said(log, "forward A"), timeout=15)
        b = await engine.client.start(flows.saga_limited, log, "B")

        async def blocked() -> bool:
            return any(e.type is EventType.RUN_BLOCKED for e in await b.events())

        await wait_for(blocked, timeout=15)
        assert await engine.client.cancel(b.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await b.result(timeout=20)
        assert await a.result(timeout=20) == "A"
    assert flows.lines(log) == ["forward A"]
    events = await b.events()
    assert not any(e.type is EventType.STEP_STARTED for e in events)


def _said(path: str, line: str) -> Any:
    async def check() -> bool:
        return line in flows.lines(path)

    return check


async def test_cancel_runs_compensations(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    async with engine.worker([flows.saga_waits]):
        handle = await engine.client.start(flows.saga_waits, log, "o2")
        await wait_for(lambda: engine.world.get_hook("saga:o2"))
        assert await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=15)
    assert flows.lines(log)[2:] == [
        f"refund o2 key={handle.run_id}:charge_card#0:compensate "
        f"fwd={handle.run_id}:charge_card#0:forward result=ch_o2",
        "release o2",
    ]


async def test_a_failed_reversal_parks_the_run_until_a_person_resumes(
    engine: Engine, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    (tmp_path / flows.STUCK_FLAG).touch()
    async with engine.worker([flows.saga_stuck]):
        handle = await engine.client.start(flows.saga_stuck, log, "o3")

        async def stuck() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck)
        info = await engine.client.get_run(handle.run_id)
        assert info.status is wayline.RunStatus.COMPENSATION_STUCK
        (tmp_path / flows.STUCK_FLAG).unlink()
        await engine.client.resume_compensation(handle.run_id)
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await handle.result(timeout=15)
    assert flows.lines(log) == ["reserve o3", "ship o3", "try release o3", "try release o3"]


async def test_abandoning_a_stuck_unwind_ends_the_run(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    (tmp_path / flows.STUCK_FLAG).touch()
    async with engine.worker([flows.saga_stuck]):
        handle = await engine.client.start(flows.saga_stuck, log, "o4")

        async def stuck() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck)
        await engine.client.abandon_compensation(handle.run_id)
        with pytest.raises(wayline.RunFailedError, match="abandoned"):
            await handle.result(timeout=15)
    assert flows.lines(log).count("try release o4") == 1


async def test_a_second_abandon_says_it_recorded_nothing(engine: Engine, tmp_path: Path) -> None:
    """``abandon_compensation`` records nothing for an unwind abandoned already (the CLI exits 1:
    nothing to do), True when it recorded the answer."""
    (tmp_path / flows.STUCK_FLAG).touch()
    async with engine.worker([flows.saga_stuck]):
        handle = await engine.client.start(flows.saga_stuck, str(tmp_path / "log"), "o9")
        parked = wayline.RunStatus.COMPENSATION_STUCK
        await wait_for(lambda: _has_status(handle, parked))
    # no worker now: the abandoned run stays parked, so the second answer meets the first
    assert (await engine.client.abandon_compensation(handle.run_id)).recorded is True
    assert (await engine.client.abandon_compensation(handle.run_id)).recorded is False
    async with engine.worker([flows.saga_stuck]):
        with pytest.raises(wayline.RunFailedError, match="abandoned"):
            await handle.result(timeout=15)


async def _has_status(handle: Any, status: wayline.RunStatus) -> bool:
    return await handle.status() is status


async def test_unwind_commands_refuse_a_run_that_is_not_stuck(engine: Engine) -> None:
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 1)
        await handle.result(timeout=10)
    with pytest.raises(wayline.WaylineError, match="not compensation_stuck"):
        await engine.client.resume_compensation(handle.run_id)
    with pytest.raises(wayline.WaylineError, match="not compensation_stuck"):
        await engine.client.abandon_compensation(handle.run_id)


async def test_a_block_lifted_during_an_unwind_starts_no_forward_step(
    engine: Engine, tmp_path: Path
) -> None:
    """A run blocked and unblocked while it unwinds (a divergence set aside, then lifted) is
    being compensated again: a queued forward step that never started must not start then
    (the unwind skipped it). The step's delivery decided from the stored status, which the
    lift set back to ``running``, and started it."""
    from tests.runtime.harness import settings
    from wayline._core.events import NewEvent, RunStatus
    from wayline._core.ids import new_run_id
    from wayline._engine.step_delivery import handle_step
    from wayline.world import Delivery

    world, run_id, log = engine.world, new_run_id(), str(tmp_path / "log")
    name = flows.one_at_a_time.name
    created = {"workflow": "saga_limited", "input": {"args": [log, "Z"]}}
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=created)], expected_seq=0)
    await world.append(run_id, [NewEvent(EventType.RUN_STARTED)])
    step = {"stepName": name, "input": {"args": [log, "Z"]}}
    await world.append(run_id, [NewEvent(EventType.STEP_CREATED, "s1", step)])
    await world.append(
        run_id,
        [
            NewEvent(EventType.RUN_CANCEL_REQUESTED, data={"reason": "no"}),
            NewEvent(EventType.RUN_COMPENSATING, data={"reason": "cancelled"}),
        ],
    )
    await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data={"message": "set aside"})])
    await world.append(run_id, [NewEvent(EventType.RUN_UNBLOCKED)])
    assert (await world.get_run(run_id)).status is RunStatus.COMPENSATING  # type: ignore[union-attr]
    payload = {"runId": run_id, "stepId": "s1", "stepName": name}
    delivery = Delivery("step", "m-1", 1, payload, b"")  # type: ignore[arg-type]
    await handle_step(world, settings(), delivery)
    assert flows.lines(log) == []  # the forward body did not run
    assert not of_type(await world.list_events(run_id), EventType.STEP_STARTED)


async def test_an_unwind_blocked_and_lifted_unwinds_on_and_parks(
    engine: Engine, tmp_path: Path
) -> None:
    """A block put over an unwind (here: a worker with another definition set the run aside)
    and lifted by a matching worker leaves the run unwinding: the reversal that fails again
    parks it for a person, and the resumed unwind ends it. The lift set the run back to
    ``running``, where the unwind could not park it, and it tried the reversal on and on."""
    from wayline._core.events import NewEvent, RunStatus

    log, world = str(tmp_path / "log"), engine.world
    (tmp_path / flows.STUCK_FLAG).touch()
    async with engine.worker([flows.saga_stuck]):
        handle = await engine.client.start(flows.saga_stuck, log, "o7")

        async def stuck() -> bool:
            return await handle.status() is RunStatus.COMPENSATION_STUCK

        await wait_for(stuck)
    await engine.client.resume_compensation(handle.run_id)  # no worker: the unwind waits
    aside = {"code": "DEFINITION_MISMATCH", "message": "waiting for a worker that has it"}
    await world.append(handle.run_id, [NewEvent(EventType.RUN_BLOCKED, data=aside)])
    assert await handle.status() is RunStatus.BLOCKED
    async with engine.worker([flows.saga_stuck]):  # the matching worker lifts the block
        await wait_for(stuck)
        lifts = of_type(await world.list_events(handle.run_id), EventType.RUN_UNBLOCKED)
        assert [e.data for e in lifts] == [{"status": "compensating"}]
        (tmp_path / flows.STUCK_FLAG).unlink()
        await engine.client.resume_compensation(handle.run_id)
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await handle.result(timeout=15)
    assert flows.lines(log) == ["reserve o7", "ship o7"] + ["try release o7"] * 3


async def test_a_block_that_lands_as_the_unwind_parks_ends_the_delivery(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker with another definition sets the run aside just as its unwind parks it (the
    reversal failed for good): the park is refused, and the delivery ends rather than try it
    again and again. The run gets a wake a second later, whose delivery lifts the block (this
    worker has the run's definition) and parks the run: the same worker, no restart."""
    from wayline._core.events import NewEvent, RunStatus

    log, world = str(tmp_path / "log"), engine.world
    (tmp_path / flows.STUCK_FLAG).touch()
    parks: list[int] = []
    real_append = world.append

    async def append(run_id: str, events: Any, **kw: Any) -> Any:
        if events and events[0].type is EventType.RUN_COMPENSATION_STUCK:
            if not parks:  # another worker's block lands first
                aside = {"code": "DEFINITION_MISMATCH", "message": "another definition"}
                await real_append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=aside)])
            parks.append(1)
        return await real_append(run_id, events, **kw)

    world.append = append  # type: ignore[method-assign]
    try:
        async with engine.worker([flows.saga_stuck]):
            handle = await engine.client.start(flows.saga_stuck, log, "o9")

            async def stuck() -> bool:
                return await handle.status() is RunStatus.COMPENSATION_STUCK

            await wait_for(stuck, timeout=20)
    finally:
        world.append = real_append  # type: ignore[method-assign]
    assert len(parks) == 2, len(parks)  # refused once (it tried at once before: ~10,000/s)
    events = await world.list_events(handle.run_id)
    lifts = of_type(events, EventType.RUN_UNBLOCKED)
    assert [e.data for e in lifts] == [{"status": "compensating"}]
    assert flows.lines(log).count("reserve o9") == 1


async def test_an_unwind_lifted_to_running_by_an_older_version_still_parks(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block put over an unwind and lifted by a version that recorded no status set the run
    ``running`` (it still does for such a log). When the reversal fails for good again, the
    park is refused ("not compensating"): the unwind is declared again, which gives the
    stored status back, and the run is parked for a person, who can resume or abandon it.
    It was left ``running`` with a quiet ack, out of reach of resume and abandon."""
    import wayline.worlds.local.appends as local_appends
    import wayline.worlds.nats.eventlog as nats_eventlog
    from wayline._core.events import NewEvent, RunStatus

    log, world = str(tmp_path / "log"), engine.world
    (tmp_path / flows.STUCK_FLAG).touch()

    async def stuck() -> bool:
        return await engine.client.handle(run_id).status() is RunStatus.COMPENSATION_STUCK

    async with engine.worker([flows.saga_stuck]):
        run_id = (await engine.client.start(flows.saga_stuck, log, "o8")).run_id
        await wait_for(stuck)
    await engine.client.resume_compensation(run_id)  # no worker: the unwind waits
    with monkeypatch.context() as older:  # the older version's block and lift
        for module in (local_appends, nats_eventlog):
            older.setattr(module, "stamped", lambda new, status, block: new)
        aside = {"code": "DEFINITION_MISMATCH", "message": "another definition"}
        await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=aside)])
        await world.append(run_id, [NewEvent(EventType.RUN_UNBLOCKED)])
    assert await engine.client.handle(run_id).status() is RunStatus.RUNNING
    async with engine.worker([flows.saga_stuck]):
        await wait_for(stuck, timeout=20)
        (tmp_path / flows.STUCK_FLAG).unlink()
        await engine.client.abandon_compensation(run_id)
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await engine.client.handle(run_id).result(timeout=15)


async def test_a_cancel_during_a_failed_runs_unwind_runs_each_reversal_once(
    engine: Engine, tmp_path: Path
) -> None:
    """A cancel asked while a failed run unwinds changes nothing the unwind owes: every
    reversal runs once, latest first, and the run ends failed with its own error."""
    from tests.runtime import fencing_flows as ff

    path = str(tmp_path / "m")
    async with engine.worker([ff.long_unwind]):
        handle = await engine.client.start(ff.long_unwind, path, 3, 0.3)
        await wait_for(lambda: _has_lines(path, 1))  # the first reversal runs
        assert await handle.cancel("changed my mind")
        with pytest.raises(wayline.RunFailedError, match="long_unwind fails"):
            await handle.result(timeout=20)
    done = [line.split()[:2] for line in flows.lines(path)]
    assert done == [[how, f"u{i}"] for i in (2, 1, 0) for how in ("start", "end")]


async def _has_lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n
