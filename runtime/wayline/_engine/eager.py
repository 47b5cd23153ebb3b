"""A task whose first step runs at once, in its creator's turn, as Python 3.12's eager tasks do.

A step body run in a task made by ``loop.create_task`` waits a turn of the loop before its
first line, and its caller waits another to resume when it ends. Most step bodies of a
sequential workflow never suspend (a no-op, a computation, a local write that answers at
once): for those the two turns (and the inline batch's two more) buy nothing. An
:class:`EagerTask` takes its first step when it is made, so a body that ends without
suspending is done before its caller goes on, and the caller reads its result without
awaiting it.

The body's own task is current from its first line, unlike the first eager bodies (9d3c68e,
reverted by 2aa8a6c), which ran their first step in the caller's task: an
``asyncio.timeout()`` or a ``TaskGroup`` entered before the first ``await``, or
``asyncio.current_task().cancel()``, then reached the caller instead of the body. Here the
task is an ordinary ``asyncio`` task in every respect but the time of its first step:

- it is built on ``asyncio.tasks._PyTask``, the pure-Python ``Task`` CPython ships beside its
  C one, and every step, the first included, is that class's own ``__step``. Cancels (before,
  at or after the first ``await``), ``cancelling()``/``uncancel()`` for timeouts and task
  groups, the context the body runs in, and an exception or a ``CancelledError`` that ends
  the body are therefore what they are for any task, by construction. Only ``__init__``
  differs: where ``Task.__init__`` schedules the first step with ``call_soon``,
  :meth:`EagerTask._step_now` runs it at once, with the caller's task swapped out and this
  one current (``Task.__eager_start`` in CPython 3.12);
- the other way, keeping the C ``Task`` and swapping it in as current around the
  coroutine's first ``send``, was not taken: the C task schedules its first step when it is
  made and 3.11 gives no way to take that back, so that step would have to replay the first
  ``yield`` through a wrapper coroutine, which would also have to redo the task's cancel of
  the future awaited (a cancel asked for during the first step); and a body that ended in its
  first step would leave a pending task behind until the next turn, with its result or its
  error to be given a second time.

What the pure-Python task costs: each later step of a body that suspends runs Python code
where the C task runs C code (a few microseconds a step, against the turns of the loop saved
on every step), and ``isinstance(asyncio.current_task(), asyncio.Task)`` is false in a body,
since ``asyncio.Task`` is the C class (``asyncio.isfuture`` and everything in ``asyncio``
that takes a task accept it).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_births = itertools.count()

_PyTask: Any = asyncio.tasks._PyTask  # type: ignore[attr-defined]
_PyFuture: Any = asyncio.futures._PyFuture  # type: ignore[attr-defined]
_enter_task: Any = asyncio.tasks._enter_task
_leave_task: Any = asyncio.tasks._leave_task
_register_task: Any = asyncio.tasks._register_task
_task_name_counter: Any = asyncio.tasks._task_name_counter  # type: ignore[attr-defined]


class EagerTask(_PyTask):  # type: ignore[misc]
    """An ``asyncio`` task that takes its first step when it is made (see the module)."""

    birth: int
    """The order this process made its eager tasks in, for a loop that orders tasks by birth
    (the simulator's, which never sees them made: they do not go through ``create_task``)."""

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # ``_PyTask.__init__`` without its ``call_soon`` of the first step: the attributes
        # set here are the ones it sets, in its order. ``loop`` is the running loop, passed
        # by a maker that holds it: asked for here, it costs a getpid call (issue #39).
        _PyFuture.__init__(self, loop=loop)  # None: the running loop
        if self._source_traceback:  # the loop's debug mode: this frame is not the caller's
            del self._source_traceback[-1]
        if not asyncio.iscoroutine(coro):
            self._log_destroy_pending = False
            raise TypeError(f"a coroutine was expected, got {coro!r}")
        self._name = f"Task-{_task_name_counter()}" if name is None else str(name)
        self._num_cancels_requested = 0
        self._must_cancel = False
        self._fut_waiter = None
        self._coro = coro
        self._context = contextvars.copy_context() if context is None else context
        self.birth = next(_births)
        # Registered before its first step (``all_tasks()`` in that step lists it, as 3.12's
        # eager tasks are listed), so a task that ends in it costs one entry of a weak set.
        _register_task(self)
        if sys.exc_info()[1] is not None:
            # The caller is handling an error (in an ``except`` block, or a ``finally`` an
            # error passes through): a step run from its frames would take that error for
            # its own (``sys.exc_info()``, a bare ``raise``, and the ``__context__`` of an
            # error the body raises, which a body that logs it would log with the caller's),
            # and Python has no way to start a coroutine clear of its caller's. So this task
            # takes its first step as any task does, in the next turn of the loop.
            self._loop.call_soon(self._Task__step, context=self._context)
            return
        self._step_now()

    def _step_now(self) -> None:
        """The first step, in the caller's turn, with this task current: the caller's task
        (if any) is left for the step and entered again after it, whatever the step raised."""
        loop = self._loop
        caller = asyncio.current_task(loop)
        if caller is not None:
            _leave_task(loop, caller)
        try:
            self._context.run(self._Task__step)
        except BaseException:
            # A KeyboardInterrupt or SystemExit, which a task's step records and passes on
            # (to the loop, for a task stepped by it): here it reaches the task's maker, so
            # the copy the task keeps is not reported at collection as an error nobody read.
            self._log_traceback = False
            raise
        finally:
            if caller is not None:
                _enter_task(loop, caller)


def start(
    coro: Coroutine[Any, Any, T],
    name: str | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> asyncio.Task[T]:
    """Make an :class:`EagerTask` of ``coro``: its first step has run when this returns
    (unless the caller is handling an error, see ``EagerTask.__init__``), so ``done()`` says
    whether it ended there (its ``result()`` then gives what it returned or
    raises what it raised, without a turn of the loop); otherwise it is awaited as any task.
    Typed as ``asyncio.Task``, whose methods it has. ``loop``: the running loop, if the
    caller holds it (None asks for it)."""
    task: asyncio.Task[T] = EagerTask(coro, name=name, loop=loop)
    return task
