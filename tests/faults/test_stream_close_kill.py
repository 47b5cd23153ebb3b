"""SIGKILL a worker process between a step's stream close and the step's completion: another
process runs the step again, which writes and closes the stream once more; the run completes
and the charge before it is never refunded."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import wayline
from tests.runtime import stream_flows
from tests.runtime.flows import lines
from tests.runtime.harness import of_type
from wayline._core.events import EventType


async def test_a_worker_killed_after_a_stream_close_leaves_a_step_that_runs_again(  # type: ignore[no-untyped-def]
    tmp_path: Path, spawn_worker, crash_world
) -> None:
    path = str(tmp_path / "marks")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(
            crash_world.arg, WAYLINE_TEST_DIE_AFTER_STREAM_CLOSE="1", **crash_world.env
        )
        handle = await client.start(stream_flows.charge_then_receipt, path, "o1", 3)
        # it kills itself once the close is stored, before the completion is recorded
        assert await asyncio.to_thread(first.wait, 30) == -signal.SIGKILL
        spawn_worker(crash_world.arg, **crash_world.env)
        assert await handle.result(timeout=60) == "ch_o1: 3 lines"
        chunks = [(c.kind, c.attempt) async for c in client.stream(handle.run_id, "receipt")]
        raw = await world.read_stream(handle.run_id, "receipt")
        events = await handle.events()
    assert chunks == [("data", 1)] * 3 + [("restart", 2)] + [("data", 2)] * 3
    assert [(r["kind"], r["attempt"]) for r in raw if r["kind"] != "data"] == [
        ("close", 1),
        ("restart", 2),
        ("close", 2),
    ]
    marks = lines(path)
    assert [m for m in marks if m.startswith("receipt")] == [
        "receipt o1 attempt 1",
        "receipt o1 attempt 2",
    ]
    assert len([m for m in marks if m.startswith("charge")]) == 1
    assert not [m for m in marks if m.startswith("refund")]
    assert not of_type(events, EventType.STEP_FAILED, EventType.RUN_COMPENSATING)
