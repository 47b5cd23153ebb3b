"""A loop that waits for an event with a timeout ends when it is cancelled, even when the cancel
lands after the event was set but before the loop ran again. On Python 3.11,
``asyncio.wait_for(event.wait(), timeout)`` returns at that instant instead of raising, so a loop
stopped only by a cancel went on for good and whoever awaited it after cancelling it hung; a
receive handed a message to a receiver that had been cancelled. Each number of loop turns
between the wake and the cancel is tried, so one of them is that instant; each wait for the
cancelled task is bounded, so a loop that goes on fails the test instead of hanging it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from wayline.waits import wait_set
from wayline.worlds.local import LocalWorld
from wayline.worlds.memory.queue import MemoryQueue
from wayline.worlds.memory.store import MemoryStore
from wayline.worlds.nats.runs_writer import RunsWriter
from wayline_operator.pump import Pump

TURNS = range(4)


async def _ends_cancelled(task: asyncio.Task[Any], what: str) -> None:
    """``task`` was cancelled: it must end, and end cancelled (not return), within 5 s."""
    try:
        await asyncio.wait({task}, timeout=5.0)
        assert task.done(), f"{what} went on after its cancel"
        assert task.cancelled(), f"{what} returned {task.result()!r} after its cancel"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _settle(turns: int = 3) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def _wake_then_cancel(
    start: Callable[[], Awaitable[Any]], wake: Callable[[], Any], turns: int, what: str
) -> None:
    task = asyncio.ensure_future(start())
    await _settle()  # the task waits for its event
    wake()
    await _settle(turns)
    if task.done():  # a single wait that ended before the cancel: nothing to swallow
        assert task.result() is True
        return
    task.cancel()
    await _ends_cancelled(task, f"{what} (a wake {turns} turns before the cancel)")


@pytest.mark.parametrize("timeout", [30.0, None])
@pytest.mark.parametrize("turns", TURNS)
async def test_wait_set_raises_a_cancel_that_lands_after_the_event(
    turns: int, timeout: float | None
) -> None:
    event = asyncio.Event()
    await _wake_then_cancel(lambda: wait_set(event, timeout), event.set, turns, "wait_set")


async def test_wait_set_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    event.set()
    assert await wait_set(event, 0.01) is True
    assert await wait_set(event, None) is True


@pytest.mark.parametrize("turns", TURNS)
async def test_a_receive_cancelled_as_a_message_comes_leaves_the_message(turns: int) -> None:
    """A receive loops until a message or its deadline; the cancel it lost made it claim the
    message for a receiver that had gone, which then waited out the visibility."""
    store = MemoryStore()
    queues: list[MemoryQueue] = []
    queue = MemoryQueue(store, visibility=30.0, aging=60.0, peers=lambda: queues)
    queues.append(queue)
    topic = f"waitfor-receive-{turns}"

    async def publish() -> None:
        await queue.enqueue(topic, {"n": turns})

    receive = asyncio.ensure_future(queue.receive(topic, wait_seconds=30.0))
    await _settle()
    sent = asyncio.ensure_future(publish())  # the publish wakes the receive
    await _settle(turns)
    receive.cancel()
    await _ends_cancelled(receive, f"a receive (a message {turns} turns before the cancel)")
    await sent
    got = await queue.receive(topic, wait_seconds=0.0)
    assert [d.payload["n"] for d in got] == [turns]


@pytest.mark.parametrize("turns", TURNS)
async def test_the_runs_index_writer_ends_on_a_cancel_that_comes_with_a_hurry(turns: int) -> None:
    """The writer's loop is stopped only by a cancel (``close``)."""
    writer = RunsWriter(index=None)  # type: ignore[arg-type]  # nothing is written here
    written: list[int] = []

    async def write(batch: list[Any]) -> None:
        written.append(len(batch))

    writer._write = write  # type: ignore[method-assign]
    writer._wake.set()  # a note came: the writer waits for the window or a hurry
    await _wake_then_cancel(writer._write_forever, writer._hurry.set, turns, "the writer")


@pytest.mark.parametrize("turns", TURNS)
async def test_the_operator_pump_ends_on_a_cancel_that_comes_with_a_touch(turns: int) -> None:
    """The pump's loop ends on ``stop`` or a cancel; a cancel alone must do."""

    async def sync(key: str) -> bool:
        return True

    pump = Pump(sync)
    pump.touch(f"waitfor-pump-{turns}", delay=30.0)  # a timer: the pump waits with a timeout
    await _wake_then_cancel(pump.run, pump._wake.set, turns, "the pump")


async def test_a_local_receive_cancelled_as_a_message_comes_leaves_the_message(
    tmp_path: Path,
) -> None:
    """The same on the SQLite world, on a real file: its receive waits for the file's changes
    in a loop bounded by its deadline. A receive that ended before its cancel came is not
    counted (its enqueue went through a thread, so the turn it ends in varies)."""
    async with LocalWorld(tmp_path / "waitfor.db") as world:
        cancelled = 0
        for turns in range(6):
            topic = f"waitfor-local-receive-{turns}"
            receive = asyncio.ensure_future(world.receive(topic, wait_seconds=30.0))
            await _settle()
            sent = asyncio.ensure_future(world.enqueue(topic, {"n": turns}))
            await _settle(turns)
            if receive.done():
                await sent
                for delivery in receive.result():
                    await world.release(delivery)
            else:
                receive.cancel()
                await _ends_cancelled(receive, f"a local receive ({turns} turns after the send)")
                await sent
                cancelled += 1
            got = await world.receive(topic, wait_seconds=5.0)
            assert [d.payload["n"] for d in got] == [turns]
            await world.ack(got[0])
        assert cancelled > 0, "every receive ended before its cancel"


async def test_wait_set_without_a_timeout_makes_no_task() -> None:
    """``wait_for(event.wait(), None)`` awaited the event itself; so does ``wait_set`` (an idle
    operator pump waits so): no task, no ``asyncio.wait``, two loop turns fewer."""
    loop = asyncio.get_running_loop()
    made: list[Any] = []
    create_task = loop.create_task

    def counting(coro: Any, **kwargs: Any) -> Any:
        made.append(coro)
        return create_task(coro, **kwargs)

    loop.create_task = counting  # type: ignore[method-assign]
    try:
        event = asyncio.Event()
        loop.call_soon(event.set)
        assert await wait_set(event, None) is True
    finally:
        loop.create_task = create_task  # type: ignore[method-assign]
    assert made == []


async def test_wait_set_with_no_time_left_says_whether_the_event_is_set() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.0) is False
    assert await wait_set(event, -1.0) is False
    event.set()
    assert await wait_set(event, 0.0) is True
    assert await wait_set(event, -1.0) is True
