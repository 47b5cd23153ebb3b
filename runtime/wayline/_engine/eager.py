"""A coroutine started in the caller's turn, given a task of its own only if it suspends.

A step body run in a task of its own costs a task and a turn of the loop before its first
line, and its caller another turn to resume when it ends. Most step bodies of a sequential
workflow never suspend (a no-op, a computation, a local write that answers at once), and for
those the task buys nothing: no cancel, no fence trip and no lease loss can reach a body
between two lines that run without yielding to the loop, so the fence's duties
(``fencing``) only begin once the body first suspends. :func:`start` runs the first step
of the coroutine at once, in a copy of the caller's context as a task would, and returns
either its result or a task that carries on from where it suspended, in that same context.
The task is then an ordinary one: cancelling it delivers ``CancelledError`` at the body's
``await``, as it would in a task started the usual way.

Python 3.12's eager tasks do the same but still make a task for every body; this project
runs on 3.11, and the count of tasks a step makes is one of the figures it is judged by
(``bench/steady.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Finished(Generic[T]):
    """The coroutine returned without suspending."""

    value: T


def start(coro: Coroutine[Any, Any, T], name: str | None = None) -> Finished[T] | asyncio.Task[T]:
    """Run ``coro`` up to its first suspension. An exception it raises before that is raised
    here, as awaiting its task would have raised it."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as stop:
        return Finished(stop.value)
    loop = asyncio.get_running_loop()
    return loop.create_task(_Resumed(coro, yielded), name=name, context=context)


class _Resumed(Coroutine[Any, Any, T]):
    """A coroutine suspended once already, handed to a task: its first ``send`` gives the
    task what the coroutine yielded (the future it waits on, whose blocking flag the task
    reads as usual), and everything after is passed through, cancellation included."""

    __slots__ = ("_coro", "_first", "_fresh")

    def __init__(self, coro: Coroutine[Any, Any, T], first: Any) -> None:
        self._coro = coro
        self._first = first
        self._fresh = True

    def send(self, value: Any) -> Any:
        if self._fresh:
            self._fresh = False
            first, self._first = self._first, None
            return first
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        # A throw before the first send (a task cancelled before its first turn) reaches the
        # body at the ``await`` it suspended on, where a cancel of its own task would.
        self._fresh = False
        self._first = None
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # pragma: no cover - the legacy signature

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("a resumed body is driven by its task only")
