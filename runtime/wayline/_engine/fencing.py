"""Self-fencing: a worker stops executing under a delivery before it can be redelivered.

"Redelivered" must always mean "the previous holder is no longer executing", or two workers
run the same step bodies at once (the redelivery's handler is the owner by message id). The
worker gives every held delivery a :class:`Fence`, set as a context variable for the
delivery's handler, so every step body run under it (inline, owned recovery, queued) is
registered with it. The worker trips the fence at the invocation bound (or at a step's own
``timeout=``), and when renewals have failed for long enough that the delivery could come back
soon; tripping cancels the delivery's async bodies. A cancelled body is an attempt that
counts: :func:`run_body` turns it into a retry (or a failure once retries are spent) with an
``INVOCATION_FENCED`` error, recorded by the ordinary paths, and the handler hands the run off
at its next step boundary. A body that cannot be cancelled (a sync body in a thread) is
waited for until just before the delivery could be redelivered; if it is still running then,
the process exits (see ``Worker``): the only way left to stop it.

The numbers (``Worker`` refuses settings that break them):

- the holder renews every ``visibility / 3`` and trips at ``max_invocation_seconds`` (checked
  every ``visibility / 30``), so a tripped fence has at least half a visibility window before
  the delivery can return, and settles (or exits) by ``last renewal + visibility - slack``
  (a refused renewal ends its bodies at once: a sync one with the process);
- so a holder never executes longer than ``max_invocation_seconds + visibility_seconds``,
  which must stay below the ownership lease: an expired lease then proves the owner stopped;
- a run hands off (ack + continue under a new message) at the first step boundary after
  ``handoff_seconds`` (half the bound by default), so a run of steps each shorter than
  ``max_invocation_seconds - handoff_seconds`` never trips the bound.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import eager

T = TypeVar("T")

log = logging.getLogger("wayline.runtime")

FENCED = "INVOCATION_FENCED"


class FencedError(Exception):
    """What a fenced body's attempt records: it was stopped, not failed by its own code."""

    wayline_code = FENCED


@dataclass(eq=False, slots=True)
class Fence:
    """One held delivery's execution, as the worker sees it."""

    bound: float
    """Seconds after receipt at which the fence trips (a ``timeout=`` step extends it)."""
    handoff: float
    """Seconds after receipt after which the run is handed off at its next step boundary."""
    received: float = field(default_factory=lambda: time.monotonic())
    renewed: float = field(default_factory=lambda: time.monotonic())
    """When the delivery was last known invisible to others (receipt or a renewal)."""
    tripped: str | None = None
    """Why the fence tripped (None while the holder may execute)."""
    lost: float | None = None
    """When the world refused a renewal (``time.monotonic``): the delivery may be redelivered
    already, so no body may run on under it (the worker's ``_renew``)."""
    bodies: set[asyncio.Task[Any]] = field(default_factory=set)
    threads: set[threading.Event] = field(default_factory=set)
    """Sync bodies still running in a thread (each event is set when its body returns)."""
    handler: asyncio.Task[Any] | None = None
    """The delivery's handler task (cancelled if it is still busy at the deadline)."""
    steps: list[str] = field(default_factory=list)
    """The names of the step bodies running under it (see :func:`running`), for the logs."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the delivery is handled on (its handler's), read without asking asyncio
        for the running loop, which costs a getpid call on CPython 3.11 (issue #39)."""
        return None if self.handler is None else self.handler.get_loop()

    def elapsed(self) -> float:
        return time.monotonic() - self.received

    def due(self) -> bool:
        """The handler should hand the run off at this step boundary."""
        return self.tripped is not None or self.elapsed() >= self.handoff

    def extend(self, seconds: float | None) -> Callable[[], None]:
        """A ``timeout=`` step starts (always first thing in its own step delivery, never
        inline): the holder executes it for ``seconds``, start to close, however that compares
        with the invocation bound. The returned function ends that when the body is done: the
        bound is back to what it was (or a grace to write the outcome) and the run is handed
        off at its next step boundary, so nothing else runs under the step's bound."""
        if seconds is None:
            return _nothing
        before = self.bound
        self.bound = self.elapsed() + seconds
        # tripped at the timeout itself, not at the renewal loop's next look (up to a
        # thirtieth of the visibility window later: a 1 s timeout cut off after 2 s)
        timer = asyncio.get_running_loop().call_later(seconds, self._timed_out, seconds)

        def restore() -> None:
            timer.cancel()
            self.bound = max(before, self.elapsed() + _WIND_DOWN)
            self.handoff = 0.0

        return restore

    def _timed_out(self, seconds: float) -> None:
        if self.tripped is None:
            self.trip(f"the step ran past its timeout of {seconds:g}s")
            log.error("fenced: %s (%s); its body is cut off", self.tripped, ", ".join(self.steps))

    def trip(self, reason: str) -> None:
        if self.tripped is not None:
            return
        self.tripped = reason
        for task in list(self.bodies):
            task.cancel()

    def lose(self, reason: str) -> None:
        """The world refused a renewal: trip (see ``lost``)."""
        self.lost = time.monotonic()
        self.trip(reason)

    def executing(self) -> bool:
        """A body is still running under this delivery (cancelled or not)."""
        return any(not t.done() for t in self.bodies) or any(
            not done.is_set() for done in self.threads
        )


_WIND_DOWN = 5.0
"""Seconds a holder keeps renewing after a ``timeout=`` body ended, to record its outcome and
hand the run off (it starts no other body in that time)."""


def _nothing() -> None:
    return None


def exit_if_executing(fence: Fence, why: str, beside: str) -> None:
    """The last instant a body under ``fence`` may run has come (``why``): one still running
    (a sync body in its thread, which no cancel reaches, or an async body that ignored its
    cancel) would run beside ``beside``, so the process exits, the only way left to stop it."""
    if fence.executing():
        log.critical(
            "a step body could not be cut off (%s) and would run beside %s: exiting the process",
            why,
            beside,
        )
        os._exit(70)


def inline_allowed(definition: Any) -> bool:
    """A step with ``timeout=`` (or ``concurrency=``) never runs inline: it is queue-owned
    from the start."""
    return not getattr(definition, "queued_only", False)


_current: ContextVar[Fence | None] = ContextVar("wayline_fence", default=None)


def current() -> Fence | None:
    return _current.get()


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The loop of the current fence's handler (None outside a delivery): for a caller on
    that loop that would otherwise ask asyncio for the running loop, a getpid call on
    CPython 3.11, several times a step (issue #39)."""
    fence = _current.get()
    return None if fence is None else fence.loop


def hold(fence: Fence) -> None:
    """Set ``fence`` for the calling task (the delivery's handler) and what it spawns."""
    _current.set(fence)


def due() -> bool:
    fence = _current.get()
    return fence is not None and fence.due()


async def run_body(call: Callable[[], Awaitable[T]], timeout: float | None, step: str = "") -> T:
    """Run the async body of step ``step`` under the current fence; raises
    :class:`FencedError` when the fence cut it off (the caller records that as an attempt).
    Meanwhile the fence names the step (a worker whose shutdown grace runs out says which)."""
    fence = _current.get()
    if fence is None:
        return await call()
    if fence.tripped is not None:
        raise FencedError(f"not started: {fence.tripped}")
    restore = fence.extend(timeout)
    task: asyncio.Task[T] | None = None
    fence.steps.append(step)
    try:
        # The body's own task takes its first step here, in this turn (``eager``): a body
        # that ends without suspending is done now, and its result is read without a turn of
        # the loop. Nothing can trip the fence during that step (it runs no other code of
        # this loop), so the fence holds the task only if it suspended.
        awaitable = call()
        body: Coroutine[Any, Any, T] = (  # a future or another awaitable: awaited in a body
            awaitable if asyncio.iscoroutine(awaitable) else _awaited(awaitable)
        )
        task = eager.start(body, name=f"wayline step {step}", loop=fence.loop)
        if task.done():
            return task.result()
        fence.bodies.add(task)
        return await task
    except asyncio.CancelledError:
        me = asyncio.current_task()
        cut = task is not None and task.cancelled()
        if fence.tripped is not None and cut and (me is None or not me.cancelling()):
            raise FencedError(f"cut off: {fence.tripped}") from None
        if fence.tripped is None and me is not None and not me.cancelling():
            # nobody cancelled the body or this delivery: the body let a cancel of its own
            # escape (an inner task's), an ordinary failure of the attempt
            raise RuntimeError(
                f"step {step!r} raised CancelledError without being cancelled"
            ) from None
        raise
    finally:
        if task is not None:
            fence.bodies.discard(task)
        fence.steps.remove(step)
        restore()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def run_sync_body(
    fn: Callable[..., T], timeout: float | None, step: str, *args: Any, **kw: Any
) -> T:
    """Run the sync body of step ``step`` in a thread under the current fence. A thread cannot
    be cancelled: the fence waits for it (and the worker exits the process if it outlives the
    delivery), and its outcome is recorded, unless the body ran past its own ``timeout=``:
    then the attempt was cut off (``FencedError``), whatever the thread returned or raised
    after (judged by when the thread ended, not by when the loop resumed the caller).
    Meanwhile the fence names the step, as ``run_body``."""
    fence = _current.get()
    context = contextvars.copy_context()
    if fence is None:
        return await asyncio.to_thread(context.run, fn, *args, **kw)
    if fence.tripped is not None:
        raise FencedError(f"not started: {fence.tripped}")
    restore = fence.extend(timeout)
    done = threading.Event()
    began, took = time.monotonic(), [0.0]

    def body() -> T:
        try:
            return context.run(fn, *args, **kw)
        finally:
            took[0] = time.monotonic() - began
            done.set()

    def late() -> bool:
        return timeout is not None and took[0] > timeout

    fence.threads.add(done)
    fence.steps.append(step)

    def past() -> FencedError:  # what a body past its timeout returned or raised is not its
        return FencedError(  # attempt's outcome
            f"cut off: the step ran past its timeout of {timeout or 0:g}s (its thread, which "
            f"cannot be stopped, returned after {took[0]:.1f}s)"
        )

    try:
        out = await asyncio.shield(asyncio.to_thread(body))
    except Exception:
        if late():
            raise past() from None
        raise
    finally:
        if done.is_set():
            fence.threads.discard(done)
        fence.steps.remove(step)
        restore()
    if late():
        raise past()
    return out
