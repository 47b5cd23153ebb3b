"""Seed 004's recovery promises under SIGKILL: waits re-armed on the time left, loops resumed at
the interrupted iteration, parallel groups re-running only members whose outcome is unknown."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import wayline
from tests.runtime import flows
from tests.runtime.harness import of_type, wait_for
from wayline._core.events import EventType


async def _kill(proc) -> None:  # type: ignore[no-untyped-def]
    os.kill(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)


async def test_a_sleep_is_rearmed_on_the_time_left(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    """An 8 s sleep whose worker dies and stays down 5 s fires at its original deadline (about
    3 s after the restart, or as soon as the new worker is up if it takes longer to start), not
    8 s after the restart: a wake re-armed from zero cannot come before ``restarted + 8`` (the
    new worker is up only after ``restarted``), so that bound separates the two whatever the
    new worker's start-up costs on a loaded machine."""
    db = crash_world.arg
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.sleeper, 8.0)

        async def sleeping() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_CREATED))

        await wait_for(sleeping)
        await _kill(first)
        await asyncio.sleep(5.0)  # down for more than half the window
        restarted = time.time()
        spawn_worker(db, **crash_world.env)
        elapsed = await handle.result(timeout=30)
        events = await handle.events()
    [created] = of_type(events, EventType.WAIT_CREATED)
    [completed] = of_type(events, EventType.WAIT_COMPLETED)
    assert completed.created_at >= created.data["resumeAt"]  # never early
    assert completed.data["resumeAt"] == created.data["resumeAt"]  # the deadline it was given
    # re-armed on the time left: before a re-armed-from-zero wake could fire
    assert completed.created_at < restarted + 8.0
    assert elapsed >= 8.0


async def test_a_loop_killed_at_iteration_7_resumes_at_7(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    db = crash_world.arg
    log = str(tmp_path / "log")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.looping, log, 10, 7, 30.0)

        async def at_seven() -> bool:
            return "7:1" in flows.lines(log)

        await wait_for(at_seven)
        await _kill(first)
        spawn_worker(db, **crash_world.env)
        assert await handle.result(timeout=20) == sum(i for i in range(10) if i % 2 == 0)
    runs = flows.lines(log)
    assert runs == [f"{i}:1" for i in range(8)] + ["7:2", "8:1", "9:1"]


async def test_a_parallel_group_reruns_only_unknown_outcomes(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    db = crash_world.arg
    log = str(tmp_path / "log")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.parallel_group, log, 1, 30.0)

        async def others_done() -> bool:
            events = await handle.events()
            return len(of_type(events, EventType.STEP_COMPLETED)) == 4

        await wait_for(others_done)
        await _kill(first)
        spawn_worker(db, **crash_world.env)
        assert await handle.result(timeout=20) == [0, 1, 2, 3, 4]
    runs = flows.lines(log)
    assert sorted(runs) == sorted(["0:1", "1:1", "1:2", "2:1", "3:1", "4:1"])


async def test_a_hook_payload_recorded_while_no_worker_runs_is_delivered(  # type: ignore[no-untyped-def]
    tmp_path: Path, spawn_worker, crash_world
) -> None:
    db = crash_world.arg
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.hook_timeout, "while-down")  # 300 ms timeout
        await wait_for(lambda: world.get_hook("while-down"))
        await _kill(first)
        await client.resume_hook("while-down", "recorded before the restart")
        await asyncio.sleep(0.5)  # the timeout is due too; the log says the payload came first
        spawn_worker(db, **crash_world.env)
        assert await handle.result(timeout=20) == "got payload"
