"""Durable streams from steps on every world: ordered, resumable, closed when the step
settles, partial output of a failed attempt marked, removed with the run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.lost_cancels import ends_on_its_cancel, losing_its_cancel
from tests.runtime import flows, sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, wait_for


async def _collect(engine: Engine, run_id: str, name: str, start: int = 0) -> list[object]:
    return [
        (c.kind, c.data, c.attempt)
        async for c in engine.client.stream(run_id, name, start=start, follow=False)
    ]


async def test_a_step_stream_is_ordered_resumable_and_closed(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    async with engine.worker([sdk_flows.producer]):
        handle = await engine.client.start(sdk_flows.producer, path, 5)
        assert await handle.result(timeout=10) == 5
        # a follower started after the end still reads everything and stops at the close
        chunks = [c async for c in engine.client.stream(handle.run_id, "progress")]
    assert [c.data for c in chunks] == [{"i": i, "attempt": 1} for i in range(5)]
    assert [c.index for c in chunks] == [0, 1, 2, 3, 4]
    assert {c.kind for c in chunks} == {"data"}
    assert [c.data for c in await _all(engine, handle.run_id, start=3)] == [
        {"i": 3, "attempt": 1},
        {"i": 4, "attempt": 1},
    ]
    raw = await engine.world.read_stream(handle.run_id, "progress")
    assert raw[-1]["kind"] == "close" and raw[-1]["outcome"] == "completed"
    assert lines(path) == ["produced 1"]


async def _all(engine: Engine, run_id: str, start: int = 0) -> list[wayline.StreamChunk]:
    return [c async for c in engine.client.stream(run_id, "progress", start=start)]


async def test_a_reader_follows_a_stream_as_it_is_written(engine: Engine, tmp_path: Path) -> None:
    path, gate = str(tmp_path / "marks"), tmp_path / "gate"
    async with engine.worker([sdk_flows.producer]):
        handle = await engine.client.start(sdk_flows.producer, path, 4, str(gate))
        seen: list[int] = []

        async def read() -> None:
            async for chunk in engine.client.stream(handle.run_id, "progress"):
                seen.append(chunk.data["i"])  # type: ignore[index]
                if len(seen) == 2:
                    gate.touch()  # the step goes on only once the reader saw two chunks

        reader = asyncio.create_task(read())
        await asyncio.wait_for(reader, timeout=15)  # ends at the close record
        assert seen == [0, 1, 2, 3]
        assert await handle.result(timeout=10) == 4


async def test_the_partial_output_of_a_failed_attempt_is_marked(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    async with engine.worker([sdk_flows.producer]):
        handle = await engine.client.start(sdk_flows.producer, path, 3, "", True)
        assert await handle.result(timeout=10) == 3
    assert await _collect(engine, handle.run_id, "progress") == [
        ("data", {"i": 0, "attempt": 1}, 1),
        ("data", {"i": 1, "attempt": 1}, 1),
        ("restart", None, 2),  # what attempt 1 wrote above was partial
        ("data", {"i": 0, "attempt": 2}, 2),
        ("data", {"i": 1, "attempt": 2}, 2),
        ("data", {"i": 2, "attempt": 2}, 2),
    ]
    assert lines(path) == ["produced 2"]


async def test_a_sync_step_writes_a_stream(engine: Engine) -> None:
    async with engine.worker([sdk_flows.sync_producer]):
        handle = await engine.client.start(sdk_flows.sync_producer, 3)
        assert await handle.result(timeout=10) == 3
    assert [c[1] for c in await _collect(engine, handle.run_id, "lines")] == [
        "line 0",
        "line 1",
        "line 2",
    ]


async def test_a_closed_stream_refuses_writes(engine: Engine, tmp_path: Path) -> None:
    async with engine.worker([sdk_flows.writes_after_close]):
        handle = await engine.client.start(sdk_flows.writes_after_close, str(tmp_path / "m"))
        assert await handle.result(timeout=10) == "STREAM_CLOSED"


async def test_cleanup_removes_a_runs_streams(engine: Engine, tmp_path: Path) -> None:
    async with engine.worker([sdk_flows.producer]):
        done = await engine.client.start(sdk_flows.producer, str(tmp_path / "m"), 2)
        assert await done.result(timeout=10) == 2
    assert await engine.world.read_stream(done.run_id, "progress")
    assert await engine.world.delete_runs(older_than=0) == 1
    assert await engine.world.read_stream(done.run_id, "progress") == []


def test_stream_outside_a_step_is_a_named_error() -> None:
    with pytest.raises(wayline.NotInStepError, match="inside a step"):
        wayline.stream("progress")


async def test_reading_a_stream_nobody_wrote_ends(engine: Engine) -> None:
    async with engine.worker([sdk_flows.sleeps_an_hour]):
        handle = await engine.client.start(sdk_flows.sleeps_an_hour)
        assert await _collect(engine, handle.run_id, "nothing") == []
        await wait_for(lambda: engine.client.wake_up(handle.run_id))
        assert await handle.result(timeout=10) == "awake"
        # a follower of a run that ended without writing the stream stops too
        assert [c async for c in engine.client.stream(handle.run_id, "nothing")] == []


async def test_a_stream_reader_that_loses_its_cancel_still_ends(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that lands just as a read completes can be lost (``asyncio.wait_for`` before
    Python 3.12, which the NATS client uses): a following reader ends all the same, instead
    of following until the run ends (here: never, no worker serves it)."""
    handle = await engine.client.start(flows.chain, 3)
    in_call = asyncio.Event()
    read = losing_its_cancel(engine.world.read_stream, in_call)
    monkeypatch.setattr(engine.world, "read_stream", read)

    async def follow() -> None:
        async for _ in engine.client.stream(handle.run_id, "progress"):
            pass

    task = asyncio.ensure_future(follow())
    await ends_on_its_cancel(task, in_call, "the reader followed on after its cancel")


async def test_a_stream_follower_in_a_task_that_handled_its_cancel_follows(
    engine: Engine, tmp_path: Path
) -> None:
    """A task that handles its own cancel by reading a stream to its end is not stopped by that
    cancel again: only a cancel that comes while it follows ends it."""
    path = str(tmp_path / "marks")
    handle = await engine.client.start(sdk_flows.producer, path, 3)  # no worker yet
    following = asyncio.Event()

    async def read_on_cancel() -> list[Any]:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            following.set()
            return [c.data async for c in engine.client.stream(handle.run_id, "progress")]
        raise AssertionError("not cancelled")

    task = asyncio.ensure_future(read_on_cancel())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait_for(following.wait(), 10)
    async with engine.worker([sdk_flows.producer]):
        assert await handle.result(timeout=20) == 3
        chunks = await asyncio.wait_for(task, 30)
    assert chunks == [{"i": i, "attempt": 1} for i in range(3)]
