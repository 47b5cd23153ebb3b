"""``wait_set`` waits through ``_ended``, a copy of ``asyncio.wait`` for one task on a loop it
holds (issue #39), and must end as the ``asyncio.wait`` it replaced did, at the same turn of the
loop: with the same outcome (True, False or cancelled), its waiter task ended the same way, and
none of the wait's done callbacks left on the waiter as the wait ends, whatever turn the event
is set, cleared or the caller cancelled at, with or without a timeout (0 and less: the timer
fires at the next turn, so a cancel also lands in the wait after the timeout), with the loop
asked for or passed in. The reference is ``wait_set`` as it was at e011396, built on
``asyncio.wait``; each of the 588 cases runs once on the reference and twice on ``wait_set``."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

from wayline.waits import wait_set

TURNS = 8


async def _on_asyncio_wait(event: asyncio.Event, timeout: float | None) -> bool:
    """``wait_set`` at e011396."""
    if timeout is None:
        return await event.wait()
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    except BaseException:
        waiter.cancel()
        raise
    if done:
        return True
    waiter.cancel()
    await asyncio.wait({waiter})
    return not waiter.cancelled()


async def _trace(
    wait: Any, timeout: float | None, set_at: int, cancel_at: int, clear_at: int
) -> list[Any]:
    """What happens to a wait, turn by turn, as the event is set and cleared and its caller
    cancelled at the turns given (-1: never)."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    made: list[asyncio.Task[Any]] = []
    create_task = loop.create_task

    def noted(coro: Coroutine[Any, Any, Any], **kw: Any) -> asyncio.Task[Any]:
        task = create_task(coro, **kw)
        made.append(task)
        return task

    loop.create_task = noted  # type: ignore[method-assign]
    try:
        caller = create_task(wait(event, timeout))
        trace: list[Any] = []
        for turn in range(TURNS):
            if turn == set_at:
                event.set()
            if turn == clear_at:
                event.clear()
            if turn == cancel_at:
                trace.append(("cancel", turn, caller.cancel()))
            await asyncio.sleep(0)
            if caller.done() and not any(t[0] == "ended" for t in trace):
                # the callbacks its waiter still has as it ends: none of the wait's own
                callbacks = [len(t._callbacks or []) for t in made]  # type: ignore[attr-defined]
                trace.append(("ended", turn, callbacks))
    finally:
        loop.create_task = create_task  # type: ignore[method-assign]
    if not caller.done():
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        trace.append(("still waiting",))
    elif caller.cancelled():
        trace.append(("cancelled",))
    else:
        trace.append(("returned", caller.result()))
    for task in made:
        trace.append(("waiter", task.done(), task.cancelled(), len(task._callbacks or [])))  # type: ignore[attr-defined]
    trace.append(("event waiters", len(event._waiters)))  # type: ignore[attr-defined]
    return trace


async def test_wait_set_ends_at_the_turn_asyncio_wait_did() -> None:
    loop = asyncio.get_running_loop()

    async def passed(event: asyncio.Event, timeout: float | None) -> bool:
        return await wait_set(event, timeout, loop)

    differ = []
    for timeout, set_at, cancel_at, clear_at in itertools.product(
        (None, 0.0, -1.0, 30.0), range(-1, 6), range(-1, 6), (-1, 1, 2)
    ):
        expected = await _trace(_on_asyncio_wait, timeout, set_at, cancel_at, clear_at)
        for wait in (wait_set, passed):
            got = await _trace(wait, timeout, set_at, cancel_at, clear_at)
            if got != expected:
                differ.append((timeout, set_at, cancel_at, clear_at, wait is passed, got, expected))
    assert differ == []
