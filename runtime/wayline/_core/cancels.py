"""A cancel that an awaited call swallowed, found on the task's count of cancels.

Here, not in ``_engine.tasks``, so that a world's start can ask it too (the worlds do not
import the engine)."""

from __future__ import annotations

import asyncio


def cancels() -> int:
    """This task's cancels not taken back yet (``Task.cancelling``): what a loop that only a
    cancel ends counts from (:func:`stop_if_cancelled`), taken when it begins."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


def stop_if_cancelled(since: int = 0) -> None:
    """Raise the cancel of this task that an awaited call swallowed: one that lands as the
    call completes is lost (``asyncio.wait_for`` before Python 3.12, in the NATS client), but
    the task still counts it (``Task.cancelling``). For the loops that only a cancel ends,
    and for a start, which must not go on as if no stop came.
    ``since`` is the count when the loop began (:func:`cancels`): a cancel counted before, which
    the caller caught and handled (waiting for a run as it cleans up, say), is not raised
    again, as nothing takes a caught cancel off the count."""
    task = asyncio.current_task()
    if task is not None and task.cancelling() > since:
        raise asyncio.CancelledError
