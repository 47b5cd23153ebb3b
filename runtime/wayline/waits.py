"""A bounded wait for an event that never swallows its task's cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), timeout)`` returns normally when the task is
cancelled after the event was set but before the task ran again: its ``except CancelledError``
branch returns the inner result once the inner future is done. A loop that is stopped only by
a cancellation then goes on for good, and whoever awaits it after cancelling it (a close)
hangs; the operator's shutdown did (``wayline_operator/periodic.py``). ``asyncio.wait`` does
not look at the inner future when it is cancelled, so the cancellation always propagates.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set (True) or ``timeout`` seconds pass (False; None waits for
    good). A cancellation of the caller always raises, even when the event was set just before.

    With a timeout it costs what ``asyncio.wait_for`` costs on Python 3.11: one task for
    ``event.wait()``, one future to wake the caller and one timer handle; on a timeout it waits
    for that task to end, as ``wait_for`` does, so a loop takes the same turns as it did (the
    simulator's seeds keep their histories). Without one it waits
    on the event itself, as ``wait_for`` did (a plain await never swallows a cancel): the task
    and ``asyncio.wait`` cost two loop turns, a task and a future more a wait. A timeout of 0
    or less returns True when the event is set already, where ``wait_for`` timed out unseen."""
    if timeout is None:
        return await event.wait()
    loop = asyncio.get_running_loop()
    waiter = loop.create_task(event.wait())  # what ``asyncio.ensure_future`` does with it
    try:
        await _wait_one(loop, waiter, timeout)
    except BaseException:
        waiter.cancel()  # the caller's cancel: it ends on the next turn
        raise
    if waiter.done():
        return True
    # Timed out: end the waiter and wait for its end, as ``wait_for`` does (the same turns).
    waiter.cancel()
    await asyncio.wait({waiter})
    return not waiter.cancelled()


async def _wait_one(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[bool], timeout: float
) -> None:
    """``asyncio.wait({task}, timeout=timeout)`` for one task, making the same future, timer
    and callbacks in the same order (``asyncio.tasks._wait`` of Python 3.11-3.13), so the
    loop takes the same turns, without the sets and checks a wait on many costs: every
    receive of a worker waits through here, and the simulator's seeds keep their histories
    (``tools/sim_hashes.py``)."""
    woken = loop.create_future()
    timer = loop.call_later(timeout, _release, woken)

    def on_completion(_: object) -> None:
        timer.cancel()
        if not woken.done():
            woken.set_result(None)

    task.add_done_callback(on_completion)
    try:
        await woken
    finally:
        timer.cancel()
        task.remove_done_callback(on_completion)


def _release(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
