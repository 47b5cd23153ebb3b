"""A step's concurrency slot whose renewal finds it lost (``step_slots.Slot``; pure logic: the
world's answer is given, as a renewal under a token the slot no longer holds gets it). The
slot's next holder may run already (a redelivery of the same step takes it under a new
token), so the body under it must end: an async body by its cancel, a sync body in its thread,
which no cancel reaches, by the process exiting. ``os._exit`` is replaced by a recorder."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import pytest

from wayline._core.concurrency import Limit
from wayline._engine import fencing, step_slots
from wayline._engine.fencing import Fence, FencedError


class _LostSlotWorld:
    """A world whose every slot renewal answers that the holder lost the slot."""

    async def renew_slot(self, *args: Any, **kwargs: Any) -> bool:
        return False

    async def release_slot(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When the process would have exited (``fencing.exit_if_executing``)."""
    when: list[float] = []
    monkeypatch.setattr(os, "_exit", lambda code: when.append(time.monotonic()))
    return when


def _slot(lease: float) -> step_slots.Slot:
    world: Any = _LostSlotWorld()
    return step_slots.Slot(world, "k", "run:1", Limit(max=1, lease=lease), token="t1")


async def test_a_sync_body_whose_slot_was_found_lost_is_not_left_running(
    exits: list[float],
) -> None:
    fence = Fence(bound=100.0, handoff=50.0)
    body_done = threading.Event()

    async def holder() -> None:
        fencing.hold(fence)
        async with _slot(1.2).held():
            await fencing.run_sync_body(body_done.wait, None, "s", 3.0)

    task = asyncio.ensure_future(holder())
    await asyncio.sleep(2.0)  # the renewal at a third of the lease (0.4 s) found it lost
    running = not body_done.is_set()
    body_done.set()
    await task
    assert fence.tripped is not None and "lost" in fence.tripped
    assert running and exits, "a sync body ran on past its lost slot; the process never exited"


async def test_an_async_body_whose_slot_was_found_lost_is_cut_off_without_an_exit(
    exits: list[float],
) -> None:
    fence = Fence(bound=100.0, handoff=50.0)

    async def holder() -> None:
        fencing.hold(fence)
        async with _slot(1.2).held():
            await fencing.run_body(lambda: asyncio.sleep(30), None, "s")

    with pytest.raises(FencedError, match="lost"):
        await asyncio.wait_for(holder(), timeout=10)
    await asyncio.sleep(1.5)  # past any timer the lost slot armed
    assert not exits
