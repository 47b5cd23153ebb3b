"""A plain ``def`` step body under its delivery's fence (``fencing.run_sync_body``; pure
logic: a fence and a thread, no world). A thread cannot be cut off: its outcome is recorded
unless it ran past the step's own ``timeout=``, judged by when the thread ended."""

from __future__ import annotations

import asyncio
import time

import pytest

from wayline._engine import fencing
from wayline._engine.fencing import Fence, FencedError


async def _under_fence(call: object) -> object:
    async def held() -> object:
        fencing.hold(Fence(bound=100.0, handoff=100.0))
        return await call  # type: ignore[misc]

    return await asyncio.create_task(held())


def _slow(seconds: float, value: str) -> str:
    time.sleep(seconds)
    return value


async def test_a_body_past_its_timeout_is_cut_off_whatever_it_returned() -> None:
    with pytest.raises(FencedError, match=r"past its timeout of 0\.1s"):
        await _under_fence(fencing.run_sync_body(_slow, 0.1, "s", 0.3, "late"))


async def test_a_body_done_in_time_is_its_outcome_though_the_loop_resumed_it_late() -> None:
    """The loop is busy (another run's fold, a slow commit) from before the body returns until
    after its timeout: the timeout's timer trips the fence first, yet the body ended in time."""
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, time.sleep, 0.3)  # blocks the loop from 0.05 s to 0.35 s
    assert await _under_fence(fencing.run_sync_body(_slow, 0.2, "s", 0.1, "done")) == "done"


async def test_a_body_under_a_fence_tripped_for_another_reason_is_its_outcome() -> None:
    """Tripped at the invocation bound, or on failed renewals: the holder still has half a
    visibility window to record what the thread did (it cannot be undone by running it
    again)."""

    async def tripped_meanwhile() -> object:
        fence = Fence(bound=100.0, handoff=100.0)
        fencing.hold(fence)
        asyncio.get_running_loop().call_later(0.05, fence.trip, "held past its bound")
        return await fencing.run_sync_body(_slow, None, "s", 0.2, "kept")

    assert await asyncio.create_task(tripped_meanwhile()) == "kept"
