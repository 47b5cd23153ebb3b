"""A changed workflow never fails a run for good (issue 16, item 8), on every world."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import versioning_flows as vf
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.definitions import WorkflowDefinition
from wayline._core.events import Event, EventType
from wayline._core.replay import Replay

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def _at_hook(
    engine: Engine, flow: WorkflowDefinition, path: str, token: str, *more: str
) -> str:
    handle = await engine.client.start(flow, path, token, *more)
    async with engine.worker([flow]):
        await wait_for(lambda: engine.world.get_hook(token))
    return handle.run_id


async def _blocked(engine: Engine, run_id: str) -> wayline.RunStatus:
    async def check() -> bool:
        info = await engine.client.get_run(run_id)
        return info.status is wayline.RunStatus.BLOCKED

    await wait_for(check)
    return (await engine.client.get_run(run_id)).status


async def test_a_divergent_worker_blocks_the_run_and_a_rollback_completes_it(
    engine: Engine, tmp_path: Path
) -> None:
    assert vf.versioned_v1.identity == vf.versioned_v2.identity  # order is not in the shape
    path = str(tmp_path / "m")
    run_id = await _at_hook(engine, vf.versioned_v1, path, "tok-v")
    async with engine.worker([vf.versioned_v2]):
        await engine.client.resume_hook("tok-v", "yes")
        await _blocked(engine, run_id)
        info = await engine.client.get_run(run_id)
    events = await engine.world.list_events(run_id)
    [hook] = of_type(events, EventType.HOOK_CREATED)
    assert info.error is not None
    assert info.error["code"] == "REPLAY_DIVERGENCE"
    assert info.error["message"] == (
        f"replay divergence at seq {hook.seq}, expected hook {hook.correlation_id}, "
        "got step 'note' (s2)"
    )
    # untouched: nothing of the divergent replay was written or run
    assert not of_type(events, EventType.RUN_FAILED)
    assert [e.correlation_id for e in of_type(events, EventType.STEP_CREATED)] == ["s1"]
    assert lines(path) == ["a"]
    async with engine.worker([vf.versioned_v1]):  # the rollback: its recovery re-arms the run
        assert await engine.client.handle(run_id).result(timeout=20) == "v1:a:yes:b"
    assert lines(path) == ["a", "b"]
    events = await engine.world.list_events(run_id)
    assert len(of_type(events, EventType.RUN_BLOCKED)) == 1
    assert of_type(events, EventType.RUN_UNBLOCKED)


async def test_a_blocked_run_is_ended_explicitly(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    run_id = await _at_hook(engine, vf.versioned_v1, path, "tok-f")
    async with engine.worker([vf.versioned_v2]):
        await engine.client.resume_hook("tok-f", "yes")
        await _blocked(engine, run_id)
        assert await engine.client.fail(run_id, "abandoned after v2 rollout") is True
    info = await engine.client.get_run(run_id)
    assert info.status is wayline.RunStatus.FAILED
    assert info.error == {
        "name": "WaylineError",
        "code": "TERMINATED",
        "message": "abandoned after v2 rollout",
    }
    assert await engine.client.fail(run_id) is False
    assert lines(path) == ["a"]


async def test_patched_is_false_on_old_history_and_true_past_it(
    engine: Engine, tmp_path: Path
) -> None:
    old_path, new_path = str(tmp_path / "old"), str(tmp_path / "new")
    old_run = await _at_hook(engine, vf.patchy_v1, old_path, "tok-old")
    async with engine.worker([vf.patchy_v2]):
        await engine.client.resume_hook("tok-old", "yes")
        assert await engine.client.handle(old_run).result(timeout=20) == "v2:yes"
        new = await engine.client.start(vf.patchy_v2, new_path, "tok-new")
        await wait_for(lambda: engine.world.get_hook("tok-new"))
        await engine.client.resume_hook("tok-new", "yes")
        assert await new.result(timeout=20) == "v2:yes"
    # the old run replays "extra" away (its history had none) but takes the patch after it
    assert lines(old_path) == ["a", "after"]
    assert lines(new_path) == ["a", "extra", "after"]

    def marked(events: list[Event]) -> list[str]:
        return [e.data["patchId"] for e in of_type(events, EventType.PATCH_MARKED)]

    old_events = await engine.world.list_events(old_run)
    new_events = await engine.world.list_events(new.run_id)
    assert marked(old_events) == ["after-hook"]
    assert marked(new_events) == ["extra-before-hook", "after-hook"]
    for run_id, events in ((old_run, old_events), (new.run_id, new_events)):
        again = Replay(vf.patchy_v2, run_id)  # a fresh replay of each log agrees with it
        again.feed(events)
        assert again.finished and not again.new_steps and not again.new_patches


async def _blocked_by_v2(
    engine: Engine, versions: tuple[WorkflowDefinition, WorkflowDefinition], path: str, *args: str
) -> str:
    """A run of the first version at its hook (``args[0]``), whose payload a worker of the
    second version receives: that worker's replay diverges and blocks the run."""
    v1, v2 = versions
    run_id = await _at_hook(engine, v1, path, *args)
    async with engine.worker([v2]):
        await engine.client.resume_hook(args[0], "yes")
        await _blocked(engine, run_id)
    assert lines(path) == ["a"]  # nothing of the divergent replay ran
    return run_id


async def _unblocked(engine: Engine, run_id: str) -> None:
    """The run was lifted (within a bounded wait) and is live again, waiting."""

    async def check() -> bool:
        events = await engine.world.list_events(run_id)
        return bool(of_type(events, EventType.RUN_UNBLOCKED))

    await wait_for(check)
    assert (await engine.client.get_run(run_id)).status is wayline.RunStatus.RUNNING


def _timeouts(events: list[Event]) -> list[Event]:
    completed = of_type(events, EventType.WAIT_COMPLETED)
    return [e for e in completed if (e.correlation_id or "").endswith(".timeout")]


TIMED = (vf.timed_v1, vf.timed_v2)
TWO_WAITS = (vf.two_waits_v1, vf.two_waits_v2)


async def test_a_rollback_completes_a_blocked_run_whose_hook_timeout_is_pending(
    engine: Engine, tmp_path: Path
) -> None:
    # The hook's timeout is a delayed wake stored for the run: the rolled-back worker re-arms
    # the run all the same, not ten minutes later when that wake comes.
    path = str(tmp_path / "m")
    run_id = await _blocked_by_v2(engine, TIMED, path, "tok-t", "10m")
    async with engine.worker([vf.timed_v1]):
        assert await engine.client.handle(run_id).result(timeout=20) == "v1:a:yes:b"
    assert lines(path) == ["a", "b"]  # each body once
    events = await engine.world.list_events(run_id)
    assert len(of_type(events, EventType.RUN_BLOCKED)) == 1
    assert not _timeouts(events)  # the payload came first: the timeout never fires


@pytest.mark.parametrize("wait", ["sleep", "hook"])
async def test_a_rollback_lifts_a_blocked_run_that_still_waits_on_a_long_timer(
    engine: Engine, tmp_path: Path, wait: str
) -> None:
    # The run is blocked while it also waits on a ten-minute sleep, or on a second hook with a
    # ten-minute timeout: the rolled-back worker brings it back to that wait at once.
    path = str(tmp_path / "m")
    second = "sleep" if wait == "sleep" else "tok-w2"
    run_id = await _blocked_by_v2(engine, TWO_WAITS, path, "tok-w", second, "10m")
    async with engine.worker([vf.two_waits_v1]):
        await _unblocked(engine, run_id)  # back at its wait, long before the timer is due
        assert lines(path) == ["a"]
        if wait == "sleep":
            assert await engine.client.wake_up(run_id)  # the sleep, fired now
            expected = "v1:a:yes:None:b"
        else:
            await engine.client.resume_hook("tok-w2", "later")
            expected = "v1:a:yes:later:b"
        assert await engine.client.handle(run_id).result(timeout=20) == expected
    assert lines(path) == ["a", "b"]
    assert not _timeouts(await engine.world.list_events(run_id))


async def test_the_timeout_of_a_rolled_back_run_fires_once_and_not_before_its_time(
    engine: Engine, tmp_path: Path
) -> None:
    # The re-arm is one more wake of the run: the timeout's own wake is not sent again beside
    # it (the world dedupes it by key while it is stored), nor fired early.
    path = str(tmp_path / "m")
    run_id = await _blocked_by_v2(engine, TWO_WAITS, path, "tok-o", "tok-o2", "6s")
    async with engine.worker([vf.two_waits_v1]):
        assert await engine.client.handle(run_id).result(timeout=30) == "v1:a:?:timed out:b"
    assert lines(path) == ["a", "b"]
    events = await engine.world.list_events(run_id)
    [timeout] = _timeouts(events)
    assert "early" not in timeout.data
    assert timeout.created_at >= timeout.data["resumeAt"]


async def test_a_rollback_completes_a_diverged_child_whose_parent_waits_on_it(
    engine: Engine, tmp_path: Path
) -> None:
    # The parent waits on its child, with nothing else to wake it: recovery leaves a child to
    # its parent, but not one a divergence blocks, which only a worker with its code lifts.
    path = str(tmp_path / "m")
    handle = await engine.client.start(vf.versioned_parent, path, "tok-c")
    async with engine.worker([vf.versioned_parent, vf.versioned_v1]):
        await wait_for(lambda: engine.world.get_hook("tok-c"))
    async with engine.worker([vf.versioned_v2]):
        await engine.client.resume_hook("tok-c", "yes")

        async def child_blocked() -> bool:
            return bool(await engine.world.list_runs(status=wayline.RunStatus.BLOCKED))

        await wait_for(child_blocked)
    assert lines(path) == ["a"]
    async with engine.worker([vf.versioned_parent, vf.versioned_v1]):
        assert await handle.result(timeout=20) == "v1:a:yes:b"
    assert lines(path) == ["a", "b"]  # each body once
