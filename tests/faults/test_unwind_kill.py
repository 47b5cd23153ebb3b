"""SIGKILL a worker process in the middle of a compensation; another process goes on with
the unwind under the compensation's own retry policy, not the forward step's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import wayline
from tests.runtime import compensation_retry_flows as crf
from tests.runtime.flows import lines
from tests.runtime.harness import of_type, wait_for
from wayline._core.events import EventType


async def test_a_compensation_keeps_its_own_policy_across_a_killed_worker(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    """The refund's first attempt hangs and its worker is SIGKILLed; the process that takes
    the run over runs the second and last attempt ``compensate_retry`` allows (2 in all),
    not the 4 its forward step's ``max_retries=3`` would give, and parks the unwind."""
    db, log = crash_world.arg, str(tmp_path / "log")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(crf.refund_interrupted, log, "t3")

        async def refund_running() -> bool:
            return "refund attempt 1" in lines(log)

        await wait_for(refund_running, timeout=20)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **crash_world.env)

        async def parked() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(parked, timeout=40)
        events = await handle.events()
    assert [line for line in lines(log) if line.startswith("refund")] == [
        "refund attempt 1",
        "refund attempt 2",
    ]
    assert lines(log).count("charge t3") == 1
    refund = [e for e in events if e.correlation_id == "s1.c0"]
    assert [e.data["attempt"] for e in of_type(refund, EventType.STEP_STARTED)] == [1, 2]
    (failed,) = of_type(refund, EventType.STEP_FAILED)
    assert failed.data["error"]["attempt"] == failed.data["error"]["attempts"] == 2
