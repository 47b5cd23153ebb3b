"""Pause and unpause on both worlds: a paused run starts no new step, child or hook wait; a
body already running finishes and records its result; a sleep that falls due while paused
fires on the unpause; a cancel of a paused run cancels it; an ended run is not paused; a
step out of attempts under ``on_exhausted="pause"`` pauses the run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import pause_flows
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType, RunStatus
from wayline.errors import RunTerminalError

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"

# How long a test looks for something that must not happen while the run is paused: a
# worker polls its queue every few milliseconds, so a wrong start would show well within it.
_QUIET = 0.5


async def _recorded(engine: Engine, run_id: str, event: EventType, n: int = 1) -> None:
    async def check() -> bool:
        return len(of_type(await engine.world.list_events(run_id), event)) >= n

    await wait_for(check, timeout=20)


async def _paused_after_its_first_step(engine: Engine, path: str, hold: str) -> None:
    """Pause the run while its first step (``slow_step``) runs, then let the body end; returns
    once its result is recorded and the worker has had time to start what comes next."""
    await wait_for(lambda: _has(path, "a-start"), timeout=20)
    [run] = await engine.client.list_runs()
    assert await engine.client.pause(run.run_id) is True
    mark(hold)
    await _recorded(engine, run.run_id, EventType.STEP_COMPLETED)
    await asyncio.sleep(_QUIET)


async def test_a_running_body_finishes_while_paused_and_the_next_step_waits(
    engine: Engine, tmp_path: Path
) -> None:
    path, hold = str(tmp_path / "m"), str(tmp_path / "hold")
    async with engine.worker([pause_flows.two_steps]):
        handle = await engine.client.start(pause_flows.two_steps, path, hold)
        await wait_for(lambda: _has(path, "a-start"), timeout=20)
        assert await handle.pause("provider outage") is True
        assert await handle.pause("again") is False  # one pause, recorded once
        mark(hold)  # the body goes on and ends while the run is paused
        await _recorded(engine, handle.run_id, EventType.STEP_COMPLETED)
        await asyncio.sleep(_QUIET)
        assert lines(path) == ["a-start", "a-end"]  # b did not start
        info = await engine.client.get_run(handle.run_id)
        assert info.status is RunStatus.PAUSED
        assert info.error == {"code": "PAUSED", "message": "provider outage", "by": "client"}
        listed = await engine.client.list_runs(status="paused")
        assert [r.run_id for r in listed] == [handle.run_id]
        assert await handle.unpause("provider is back") is True
        assert await handle.result(timeout=20) == ["a", "b"]
    assert lines(path) == ["a-start", "a-end", "b"]
    events = await handle.events()
    paused, unpaused = of_type(events, EventType.RUN_PAUSED, EventType.RUN_UNPAUSED)
    assert paused.data["reason"] == "provider outage" and paused.data["by"] == "client"
    assert unpaused.data["reason"] == "provider is back"
    # the body's result was recorded while paused; the next step was created after the unpause
    created = of_type(events, EventType.STEP_CREATED)
    assert paused.seq < created[1].seq and unpaused.seq < created[1].seq


async def test_a_sleep_due_while_paused_fires_on_unpause(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([pause_flows.nap_then_step]):
        handle = await engine.client.start(pause_flows.nap_then_step, path, 0.2)
        await _recorded(engine, handle.run_id, EventType.WAIT_CREATED)
        assert await engine.client.pause(handle.run_id, "hold the nap") is True
        [created] = of_type(await handle.events(), EventType.WAIT_CREATED)

        async def due() -> bool:
            return engine.world.now() > float(created.data["resumeAt"]) + _QUIET

        await wait_for(due, timeout=20)
        events = await handle.events()
        assert not of_type(events, EventType.WAIT_COMPLETED) and not lines(path)
        assert await engine.client.unpause(handle.run_id) is True
        assert await handle.result(timeout=20) == "after-sleep"
    events = await handle.events()
    [unpaused] = of_type(events, EventType.RUN_UNPAUSED)
    [fired] = of_type(events, EventType.WAIT_COMPLETED)
    assert fired.seq > unpaused.seq


async def test_no_hook_wait_starts_while_paused(engine: Engine, tmp_path: Path) -> None:
    path, hold = str(tmp_path / "m"), str(tmp_path / "hold")
    token = f"approve:{tmp_path.name}"
    async with engine.worker([pause_flows.step_then_hook]):
        handle = await engine.client.start(pause_flows.step_then_hook, path, hold, token)
        await _paused_after_its_first_step(engine, path, hold)
        assert not of_type(await handle.events(), EventType.HOOK_CREATED)
        assert await engine.client.open_hooks(handle.run_id) == []
        assert await handle.unpause() is True
        await engine.client.wait_for_hook(token, timeout=20)
        await engine.client.resume_hook(token, {"ok": True})
        assert await handle.result(timeout=20) == {"ok": True}


async def test_no_child_starts_while_paused(engine: Engine, tmp_path: Path) -> None:
    path, hold = str(tmp_path / "m"), str(tmp_path / "hold")
    flows = [pause_flows.step_then_child, pause_flows.pause_kid]
    async with engine.worker(flows):
        handle = await engine.client.start(pause_flows.step_then_child, path, hold)
        await _paused_after_its_first_step(engine, path, hold)
        assert not of_type(await handle.events(), EventType.CHILD_CREATED)
        assert [r.run_id for r in await engine.client.list_runs()] == [handle.run_id]
        assert await handle.unpause() is True
        assert await handle.result(timeout=20) == "kid"
    assert lines(path) == ["a-start", "a-end", "kid"]


async def test_a_cancel_of_a_paused_run_cancels_it(engine: Engine, tmp_path: Path) -> None:
    path, hold = str(tmp_path / "m"), str(tmp_path / "hold")
    async with engine.worker([pause_flows.two_steps]):
        handle = await engine.client.start(pause_flows.two_steps, path, hold)
        await _paused_after_its_first_step(engine, path, hold)
        assert await handle.cancel("not needed any more") is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    assert lines(path) == ["a-start", "a-end"]  # nothing after the pause ran
    events = await handle.events()
    [unpaused] = of_type(events, EventType.RUN_UNPAUSED)
    [requested] = of_type(events, EventType.RUN_CANCEL_REQUESTED)
    assert unpaused.data["by"] == "cancel" and unpaused.seq + 1 == requested.seq
    assert events[-1].type is EventType.RUN_CANCELLED


async def test_an_ended_run_is_not_paused(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([pause_flows.nap_then_step]):
        handle = await engine.client.start(pause_flows.nap_then_step, path, 0.0)
        assert await handle.result(timeout=20) == "after-sleep"
    before = await handle.events()
    with pytest.raises(RunTerminalError, match="has ended"):
        await handle.pause()
    with pytest.raises(RunTerminalError, match="has ended"):
        await handle.unpause()
    assert await handle.events() == before  # nothing recorded
    assert (await handle.status()) is RunStatus.COMPLETED


async def _has(path: str, line: str) -> bool:
    return line in lines(path)


async def test_a_step_out_of_attempts_pauses_the_run_and_gets_a_fresh_budget(
    engine: Engine, tmp_path: Path
) -> None:
    """``RetryPolicy(on_exhausted="pause")``: the last attempt's failure pauses the run
    instead of failing the step; each unpause gives the step its attempts again."""
    path, fixed = str(tmp_path / "m"), str(tmp_path / "fixed")

    async def paused() -> bool:
        return (await engine.client.get_run(handle.run_id)).status is RunStatus.PAUSED

    async with engine.worker([pause_flows.charge]):
        handle = await engine.client.start(pause_flows.charge, path, fixed)
        await wait_for(paused, timeout=20)
        assert lines(path) == ["try-1", "try-2"]
        info = await engine.client.get_run(handle.run_id)
        assert info.error is not None and info.error["by"] == "retry"
        assert "ran out of attempts" in info.error["message"]
        assert info.error["message"].endswith("(after 2 attempts)")  # the step's attempt field
        assert await handle.unpause("not fixed yet") is True  # a fresh budget of 2 attempts
        await _recorded(engine, handle.run_id, EventType.RUN_PAUSED, 2)
        await wait_for(paused, timeout=20)
        assert lines(path) == ["try-1", "try-2", "try-1", "try-2"]
        mark(fixed)
        assert await handle.unpause("provider fixed") is True
        assert await handle.result(timeout=20) == "charged"
    assert lines(path) == ["try-1", "try-2", "try-1", "try-2", "try-1"]
    events = await handle.events()
    assert not of_type(events, EventType.STEP_FAILED)
    pauses = of_type(events, EventType.RUN_PAUSED)
    assert [p.data["by"] for p in pauses] == ["retry", "retry"]
    exhausted = [
        e for e in of_type(events, EventType.STEP_RETRYING) if e.data["source"] == "exhausted"
    ]
    # each pause is written with the retry that asked for it, in one append
    assert [e.seq + 1 for e in exhausted] == [p.seq for p in pauses]


async def test_a_run_paused_before_it_started_starts_on_unpause(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    handle = await engine.client.start(pause_flows.nap_then_step, path, 0.0)
    assert await handle.pause("not yet") is True  # pending: no worker has seen it
    async with engine.worker([pause_flows.nap_then_step]):
        await asyncio.sleep(_QUIET)
        assert not of_type(await handle.events(), EventType.RUN_STARTED)
        assert (await handle.status()) is RunStatus.PAUSED
        assert await handle.unpause() is True
        assert (await handle.status()) is not RunStatus.PAUSED
        assert await handle.result(timeout=20) == "after-sleep"
    events = await handle.events()
    [paused] = of_type(events, EventType.RUN_PAUSED)
    assert paused.data["statusBefore"] == "pending"


async def test_a_step_out_of_attempts_after_a_cancel_fails_and_the_run_ends_cancelled(
    engine: Engine, tmp_path: Path
) -> None:
    """A cancel asked for while the step's last attempt runs: the attempt's failure is the
    step's (``on_exhausted="pause"`` does not pause a run that is to stop), and the run ends
    cancelled instead of staying paused with nobody to unpause it."""
    path, hold = str(tmp_path / "marks"), str(tmp_path / "hold")
    async with engine.worker([pause_flows.cancelled_while_exhausting]):
        handle = await engine.client.start(pause_flows.cancelled_while_exhausting, path, hold)
        await wait_for(lambda: _has(path, "f-start"), timeout=20)
        assert await handle.cancel("no longer wanted") is True
        mark(hold)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
        events = await engine.world.list_events(handle.run_id)
        assert of_type(events, EventType.RUN_PAUSED) == []
        # the run may end before the body does (it has nothing to reverse): then the world
        # refuses the late failure; either way the step has one outcome at most
        assert len(of_type(events, EventType.STEP_FAILED)) <= 1
