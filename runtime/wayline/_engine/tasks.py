"""Every long-lived task is created here: named, tracked, and its unexpected exit logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("wayline.runtime")


def spawn(
    coro: Coroutine[Any, Any, Any], name: str, into: set[asyncio.Task[Any]]
) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coro, name=name)
    into.add(task)
    task.add_done_callback(lambda t: _done(t, into))
    return task


def _done(task: asyncio.Task[Any], into: set[asyncio.Task[Any]]) -> None:
    into.discard(task)
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task %s exited unexpectedly: %r", task.get_name(), exc, exc_info=exc)


def cancels() -> int:
    """This task's cancels not taken back yet (``Task.cancelling``): what a loop that only a
    cancel ends counts from (:func:`stop_if_cancelled`), taken when it begins."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


def stop_if_cancelled(since: int = 0) -> None:
    """Raise the cancel of this task that an awaited call swallowed: one that lands as the
    call completes is lost (``asyncio.wait_for`` before Python 3.12, in the NATS client), but
    the task still counts it (``Task.cancelling``). For the loops that only a cancel ends.
    ``since`` is the count when the loop began (:func:`cancels`): a cancel counted before, which
    the caller caught and handled (waiting for a run as it cleans up, say), is not raised
    again, as nothing takes a caught cancel off the count."""
    task = asyncio.current_task()
    if task is not None and task.cancelling() > since:
        raise asyncio.CancelledError
