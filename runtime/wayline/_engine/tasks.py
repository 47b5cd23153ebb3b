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
