"""A worker's slots of one kind (``_engine.delivery_slots``): never more held than there are,
a released slot goes to the message waiting in hand before any new receive, and a waiter
cancelled as it was handed one passes it on."""

from __future__ import annotations

import asyncio

import pytest

from wayline._engine.delivery_slots import Slots


async def test_taking_never_exceeds_the_limit() -> None:
    slots = Slots(2)
    assert slots.take_now(5) == 2
    assert slots.taken == 2 and slots.free() == 0
    assert slots.take_now(1) == 0
    slots.release()
    assert slots.free() == 1 and slots.take_now(3) == 1


async def test_a_released_slot_goes_to_the_waiter_not_to_a_new_receive() -> None:
    slots = Slots(1)
    assert slots.take_now(1) == 1
    waiter = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    polled = asyncio.ensure_future(slots.until_free())
    await asyncio.sleep(0)
    slots.release()  # handed to the waiter: still one held, none free
    await waiter
    assert slots.taken == 1 and slots.free() == 0
    await asyncio.sleep(0)
    assert not polled.done()
    slots.release()
    await asyncio.wait_for(polled, 1)
    assert slots.taken == 0 and slots.free() == 1


async def test_no_slot_is_free_while_a_message_waits_for_one() -> None:
    slots = Slots(2)
    assert slots.take_now(2) == 2
    first = asyncio.ensure_future(slots.take())
    second = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    slots.release()
    await first
    assert slots.free() == 0  # the second still waits: no new receive
    slots.release()
    await second
    assert slots.taken == 2


async def test_a_waiter_cancelled_as_it_is_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    assert slots.take_now(1) == 1
    cancelled = asyncio.ensure_future(slots.take())
    after = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    slots.release()  # handed to the first waiter, which is cancelled before it runs
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.wait_for(after, 1)
    assert slots.taken == 1
    slots.release()
    assert slots.taken == 0


async def test_a_timed_out_wait_takes_nothing() -> None:
    slots = Slots(1)
    assert slots.take_now(1) == 1
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slots.take(), 0.01)
    slots.release()
    assert slots.taken == 0 and slots.free() == 1


async def test_no_slot_receives_nothing_and_a_negative_count_is_refused() -> None:
    slots = Slots(0)
    assert slots.free() == 0 and slots.take_now(1) == 0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slots.until_free(), 0.01)
    with pytest.raises(ValueError, match="negative"):
        Slots(-1)
    with pytest.raises(RuntimeError, match="never taken"):
        Slots(1).release()
