"""A step that closed its stream and died before its completion was recorded runs again: it
writes and closes the stream once more, the run completes, nothing is compensated, and the
stream reads as one coherent whole across the two attempts. A closed stream still refuses a
write from another step, or from a body of the step after its completion was recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import sdk_flows, stream_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, settings
from wayline._core.events import EventType
from wayline._sdk.streams import attempt_streams
from wayline.world import World

RECEIPT = [
    ("data", {"line": 0, "attempt": 1}, 1),
    ("data", {"line": 1, "attempt": 1}, 1),
    ("restart", None, 2),  # what attempt 1 wrote above belongs to an attempt that died
    ("data", {"line": 0, "attempt": 2}, 2),
    ("data", {"line": 1, "attempt": 2}, 2),
]


def _freeze_after_close(world: World) -> asyncio.Event:
    """Make ``world`` store a stream's ``close`` record, then never return: the worker that
    uses it stops there, as a process killed between the close and the step's completion
    (the close is written first, see ``_engine.step_runner``). The event is set once the
    close is stored."""
    closed = asyncio.Event()
    write = world.write_stream

    async def write_then_freeze(run_id: str, stream: str, records: Any) -> None:
        await write(run_id, stream, records)
        if any(r.get("kind") == "close" for r in records):
            closed.set()
            await asyncio.Event().wait()

    world.write_stream = write_then_freeze  # type: ignore[method-assign]
    return closed


async def _chunks(engine: Engine, run_id: str, *, follow: bool) -> list[object]:
    return [
        (c.kind, c.data, c.attempt)
        async for c in engine.client.stream(run_id, "receipt", follow=follow)
    ]


async def test_a_step_killed_after_closing_its_stream_runs_again_and_the_run_completes(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    dying = await engine.make_world()
    closed = _freeze_after_close(dying)
    flow = stream_flows.charge_then_receipt
    worker = wayline.Worker(dying, [flow], settings=settings())
    await worker.start()
    handle = await engine.client.start(flow, path, "o1", 2)
    # a reader following from the start sees both attempts and ends at the second close
    follower = asyncio.ensure_future(_chunks(engine, handle.run_id, follow=True))
    await asyncio.wait_for(closed.wait(), timeout=20)
    await worker.close(graceful=False)
    assert not follower.done()  # the first close did not end it: the step had not settled
    async with engine.worker([flow]):
        assert await handle.result(timeout=30) == "ch_o1: 2 lines"
        assert await asyncio.wait_for(follower, timeout=20) == RECEIPT
    assert await _chunks(engine, handle.run_id, follow=False) == RECEIPT
    marks = lines(path)
    assert [m.split(" key=")[0] for m in marks if m.startswith("charge")] == ["charge o1"]
    assert [m for m in marks if m.startswith("receipt")] == [
        "receipt o1 attempt 1",
        "receipt o1 attempt 2",
    ]
    assert not [m for m in marks if m.startswith("refund")]
    raw = await engine.world.read_stream(handle.run_id, "receipt")
    closes = [(r["attempt"], r["outcome"]) for r in raw if r["kind"] == "close"]
    assert closes == [(1, "completed"), (2, "completed")]
    events = await handle.events()
    assert len(of_type(events, EventType.STEP_COMPLETED)) == 2  # the charge, the receipt
    assert not of_type(events, EventType.STEP_FAILED, EventType.RUN_COMPENSATING)


async def test_a_stream_read_from_its_first_close_resumes_into_the_rerun(
    engine: Engine, tmp_path: Path
) -> None:
    """``start=index + 1`` after the last chunk of the attempt that died reads on into the
    next attempt's chunks."""
    dying = await engine.make_world()
    closed = _freeze_after_close(dying)
    flow = stream_flows.charge_then_receipt
    worker = wayline.Worker(dying, [flow], settings=settings())
    await worker.start()
    handle = await engine.client.start(flow, str(tmp_path / "marks"), "o2", 2)
    await asyncio.wait_for(closed.wait(), timeout=20)
    await worker.close(graceful=False)
    before = [c async for c in engine.client.stream(handle.run_id, "receipt", follow=False)]
    assert [c.attempt for c in before] == [1, 1]
    async with engine.worker([flow]):
        assert await handle.result(timeout=30) == "ch_o2: 2 lines"
    after = engine.client.stream(handle.run_id, "receipt", start=before[-1].index + 1)
    assert [(c.kind, c.data, c.attempt) async for c in after] == RECEIPT[2:]


async def test_a_stream_closed_by_a_settled_step_refuses_a_late_body_of_that_step(
    engine: Engine, tmp_path: Path
) -> None:
    """A body of the step that runs after the step's completion was recorded (a duplicate
    that lost its claim) finds the stream closed, as a later step does
    (``test_streams.test_a_closed_stream_refuses_writes``)."""
    async with engine.worker([sdk_flows.producer]):
        handle = await engine.client.start(sdk_flows.producer, str(tmp_path / "m"), 2)
        assert await handle.result(timeout=10) == 2
    [done] = of_type(await handle.events(), EventType.STEP_COMPLETED)
    stored = await engine.world.read_stream(handle.run_id, "progress")
    late = attempt_streams(engine.world, handle.run_id, done.correlation_id or "", 2)
    with late, pytest.raises(wayline.StreamClosedError, match="closed by step"):
        await wayline.stream("progress").write({"late": True})
    assert await engine.world.read_stream(handle.run_id, "progress") == stored


async def test_a_restart_written_after_a_final_close_is_not_read(
    engine: Engine, tmp_path: Path
) -> None:
    """Anyone who can write to the world can append records in a step's shape (a NATS stream
    takes anyone's bytes): a restart after the close of the attempt whose outcome is recorded
    is not the step's, and readers still end at that close."""
    async with engine.worker([sdk_flows.producer]):
        handle = await engine.client.start(sdk_flows.producer, str(tmp_path / "m"), 2)
        assert await handle.result(timeout=10) == 2
    [done] = of_type(await handle.events(), EventType.STEP_COMPLETED)
    step = done.correlation_id or ""
    await engine.world.write_stream(
        handle.run_id,
        "progress",
        [
            {"kind": "restart", "step": step, "attempt": 2, "abandoned": 1},
            {"kind": "data", "data": "forged", "step": step, "attempt": 2},
        ],
    )
    expected = [("data", {"i": i, "attempt": 1}, 1) for i in range(2)]
    for follow in (False, True):
        chunks = engine.client.stream(handle.run_id, "progress", follow=follow)
        assert [(c.kind, c.data, c.attempt) async for c in chunks] == expected
