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


async def wait_set(
    event: asyncio.Event, timeout: float | None, loop: asyncio.AbstractEventLoop | None = None
) -> bool:
    """Wait until ``event`` is set (True) or ``timeout`` seconds pass (False; None waits for
    good). A cancellation of the caller always raises, even when the event was set just before.
    ``loop``: the running loop, passed by a caller that holds it already.

    With a timeout it costs what ``asyncio.wait_for`` costs on Python 3.11: one task for
    ``event.wait()``, one future to wake the caller and one timer handle; on a timeout it waits
    for that task to end, as ``wait_for`` does, so a loop takes the same turns as it did (the
    simulator's seeds keep their histories). Without one it waits
    on the event itself, as ``wait_for`` did (a plain await never swallows a cancel): the task
    and ``asyncio.wait`` cost two loop turns, a task and a future more a wait. A timeout of 0
    or less returns True when the event is set already, where ``wait_for`` timed out unseen.

    The loop is asked for once (none of it when passed in), and the waits are
    :func:`_ended`, which takes the loop, not ``asyncio.wait``, which asks again: each ask
    is a ``getpid`` system call on CPython 3.11, and ``ensure_future`` and two
    ``asyncio.wait`` calls made three to four of them a wait where ``wait_for`` made one
    (issue #39). The event's own ``wait`` asks once more, as it did under ``wait_for``."""
    if timeout is None:
        return await event.wait()
    if loop is None:
        loop = asyncio.get_running_loop()
    waiter = loop.create_task(event.wait())
    try:
        await _ended(waiter, timeout, loop)
    except BaseException:
        waiter.cancel()  # the caller's cancel: it ends on the next turn
        raise
    if waiter.done():
        return True
    # Timed out: end the waiter and wait for its end, as ``wait_for`` does (the same turns).
    waiter.cancel()
    await _ended(waiter, None, loop)
    return not waiter.cancelled()


async def _ended(
    task: asyncio.Task[bool], timeout: float | None, loop: asyncio.AbstractEventLoop
) -> None:
    """``asyncio.wait({task}, timeout=timeout)`` on a loop already held: the same future, timer
    and done callback, made and dropped in the same order, so the same turns of the loop."""
    woken = loop.create_future()
    timer = None if timeout is None else loop.call_later(timeout, _wake, woken)

    def on_end(_: object) -> None:
        if timer is not None:
            timer.cancel()
        _wake(woken)

    task.add_done_callback(on_end)
    try:
        await woken
    finally:
        if timer is not None:
            timer.cancel()
        task.remove_done_callback(on_end)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
