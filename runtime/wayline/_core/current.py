"""The replay a workflow function is running in, if any: one context variable.

The replay sets it while it steps its fibers; a step definition called inside a workflow reads
it to hand the call to the replay instead of running the body. Kept apart from ``replay`` so
that ``definitions`` (below ``replay``) can read it without importing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol


class StepCaller(Protocol):
    """What a step call inside a workflow needs: ``Replay.call_step``."""

    def call_step(
        self, definition: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> Any: ...


replay_var: ContextVar[StepCaller | None] = ContextVar("wayline_replay", default=None)


class outside_any_task:  # named as the function it replaces: ``with outside_any_task():``
    """No asyncio task is current while workflow code runs in here.

    A workflow is stepped by its replay, not by the event loop: the task that happens to be
    current is the worker's delivery, which is not the workflow's. ``asyncio.timeout`` (and
    ``wait_for`` on 3.12+) in a workflow armed a cancel of that task, which later cut off
    the delivery in the middle of a step and left the run stuck until its step's lease ran
    out, again on every retry. With no current task they raise at once instead (see
    ``Replay._step_fiber``).

    A plain class rather than a ``contextmanager`` generator: a replay enters it several
    times a step, and a generator's frame, its wrapper object and the ``next``/``send``
    round trips cost more than the task swap itself (issue #39, item 2)."""

    __slots__ = ("_loop", "_task")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a replay fed outside any loop (tests, tools)
            return
        task = asyncio.current_task(loop)
        if task is None:
            return
        asyncio.tasks._leave_task(loop, task)
        self._loop, self._task = loop, task

    def __exit__(self, *exc: object) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            self._loop, self._task = None, None
            asyncio.tasks._enter_task(loop, task)
