"""A step's completion rides on the run's next write (``wayline.deferred``), on every world:
one write per sequential step, and the log's order and timestamps stay the only truth."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.runtime import flows
from tests.runtime.harness import Engine, file_exists, of_type, wait_for
from wayline._core.events import EventType


def _count_appends(engine: Engine) -> list[list[str]]:
    writes: list[list[str]] = []
    original = engine.world.append

    async def counting(run_id: str, events: Any, *, expected_seq: int | None = None) -> Any:
        writes.append([str(e.type) for e in events])
        return await original(run_id, events, expected_seq=expected_seq)

    engine.world.append = counting  # type: ignore[method-assign]
    return writes


async def test_a_sequential_step_costs_one_write(engine: Engine) -> None:
    writes = _count_appends(engine)
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 20)
        assert await handle.result(timeout=20) == sum(range(20))
    carried = [w for w in writes if w[:1] == ["step_completed"] and "step_created" in w]
    assert len(carried) == 19  # every completion but the last rides with the next step
    step_writes = [w for w in writes if any(t.startswith("step_") for t in w)]
    assert len(step_writes) <= 21, writes
    events = await handle.events()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len(of_type(events, EventType.STEP_COMPLETED)) == 20


async def test_workflow_time_after_a_step_is_the_written_completion_time(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = str(tmp_path / "bodies")
    caplog.set_level(logging.DEBUG, logger="wayline.runtime")
    async with engine.worker([flows.timed_chain]):
        handle = await engine.client.start(flows.timed_chain, log, 4)
        seen = await handle.result(timeout=20)
    # the first read of time stops the replay once; the delivery then writes as it goes
    rebuilt = [r for r in caplog.records if "read time" in r.getMessage()]
    assert len(rebuilt) == 1
    completed = of_type(await handle.events(), EventType.STEP_COMPLETED)
    # (as wayline.now gives it: a datetime, microsecond precision)
    assert seen == [datetime.fromtimestamp(e.created_at, UTC).timestamp() for e in completed]
    assert flows.lines(log) == [f"step {i}" for i in range(4)]  # each body once


async def test_a_sleep_after_a_step_counts_from_the_written_completion(
    engine: Engine, tmp_path: Path
) -> None:
    log = str(tmp_path / "bodies")
    async with engine.worker([flows.step_then_sleep]):
        handle = await engine.client.start(flows.step_then_sleep, log)
        assert await handle.result(timeout=20) == "after"
    events = await handle.events()
    [done] = of_type(events, EventType.STEP_COMPLETED)[:1]
    [wait] = of_type(events, EventType.WAIT_CREATED)
    assert wait.data["resumeAt"] == done.created_at + 0.2
    assert flows.lines(log) == ["before", "after"]


async def test_an_event_landing_during_the_step_is_honoured_in_log_order(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = str(tmp_path / "bodies")
    token = f"race-{os.getpid()}-{tmp_path.name}"
    caplog.set_level(logging.DEBUG, logger="wayline.runtime")
    async with engine.worker([flows.race_hook_and_step]):
        handle = await engine.client.start(flows.race_hook_and_step, log, token, 1.0)
        await wait_for(file_exists(log))
        await engine.client.resume_hook(token, "payload")
        assert await handle.result(timeout=20) == [0, "payload", "done"]
    # the owner's live replay saw the step end first; its fenced write failed, and it rebuilt
    assert any("rebuilt" in r.getMessage() for r in caplog.records)
    events = await handle.events()
    order = [e.type for e in events if e.correlation_id in ("h1", "s1")]
    assert order.index(EventType.HOOK_RECEIVED) < order.index(EventType.STEP_COMPLETED)
    labels = [e.data["input"] for e in of_type(events, EventType.STEP_CREATED)]
    branches = [str(a) for a in labels if "branch" in str(a)]
    assert len(branches) == 1 and "hook branch" in branches[0]
    assert sorted(flows.lines(log)) == ["attempt 1", "hook branch"]


async def test_a_run_starts_with_its_first_step_and_ends_with_its_last(engine: Engine) -> None:
    writes = _count_appends(engine)
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 3)
        assert await handle.result(timeout=20) == 3
    assert writes[0] == ["run_created"]
    assert writes[1] == ["run_started", "step_created", "step_started"]
    assert writes[-1] == ["step_completed", "run_completed"]
    assert len(writes) == 5  # created; started + step 0; two carried completions; the end


async def test_time_read_before_the_first_suspension_is_the_run_start(engine: Engine) -> None:
    writes = _count_appends(engine)
    async with engine.worker([flows.deterministic]):
        handle = await engine.client.start(flows.deterministic)
        first, _, _, after = await handle.result(timeout=20)
    assert writes[1] == ["run_started"]  # written alone: the workflow read time under it
    events = await handle.events()
    started = of_type(events, EventType.RUN_STARTED)[0]
    completed = of_type(events, EventType.STEP_COMPLETED)[0]
    assert first == datetime.fromtimestamp(started.created_at, UTC).timestamp()
    assert after == datetime.fromtimestamp(completed.created_at, UTC).timestamp()


async def test_result_does_not_depend_on_the_terminal_hint(engine: Engine) -> None:
    """A hint lost on the way (a dropped republish, another process's write) only delays the
    answer to the next poll."""
    loop = asyncio.get_running_loop()
    engine.client.ends.watch = lambda run_id: loop.create_future()  # type: ignore[method-assign]
    engine.client.ends.unwatch = lambda run_id, fut: None  # type: ignore[method-assign]
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 2)
        assert await handle.result(timeout=20) == 1
