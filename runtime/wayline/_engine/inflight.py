"""Inline bodies a delivery is running: the run moves on as soon as one of them settles.

``await wayline.race(d(10_000), d(100), d(20_000))`` must settle when its winner does, and
the run go on (and even end) while the losers' inline bodies still run. So the handler does
not wait for a whole inline batch: it feeds each completion to the replay as it is recorded
and keeps driving; the bodies still running stay here, owned by this delivery. Three rules
keep seed 000's invariants:

- the delivery is settled (acked, handed back or off) only after every body here settled
  (:meth:`InFlight.drain`), so no path acks the owning message while an owned step is
  non-terminal; hand-off waits for them too;
- a step running here is not dispatched again by this delivery's decision table (its stamp
  names this very message, which would otherwise read as "owned recovery");
- a body that settles after the run moved on writes its own completion (never deferred onto
  a later write, see ``deferred``), and one that settles after the run ended is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .._core.events import Event
from .._core.replay import Replay
from . import eager, fencing
from .deferred import InlineBatch


@dataclass(slots=True)
class InFlight:
    tasks: dict[asyncio.Task[list[Event]], InlineBatch] = field(default_factory=dict)
    _settled: asyncio.Future[None] | None = None
    """What :meth:`next` waits on: set by a body as it settles (see :meth:`_run`)."""

    @property
    def pending(self) -> bool:
        return bool(self.tasks)

    async def start(
        self, bodies: list[Coroutine[Any, Any, list[Event]]], group: InlineBatch
    ) -> list[Event]:
        """Start an inline batch; returns the events of the first bodies to settle.

        Each body's task takes its first step here, in the handler's turn (``eager``): by
        the time the next body starts, the one before has registered itself as running
        (``RunSession.run_inline``), and a body that settled in that step (a step whose body
        did not suspend and whose completion the next write carries) is done already, its
        events read by :meth:`next` without a turn of the loop."""
        fence = fencing.current()  # its handler's loop, so no body asks for the running one
        loop = None if fence is None else fence.loop
        for i, body in enumerate(bodies):
            try:
                task = eager.start(self._run(body), name="wayline inline body", loop=loop)
            except BaseException:
                # a KeyboardInterrupt or SystemExit from the body's first step, passed on to
                # its maker (``EagerTask``): the bodies not started yet never will be
                for rest in bodies[i + 1 :]:
                    rest.close()
                raise
            if not task.done():
                task.add_done_callback(partial(self._ended, body))
            self.tasks[task] = group
        return await self.next()

    async def _run(self, body: Coroutine[Any, Any, list[Event]]) -> list[Event]:
        """The body, waking :meth:`next` as it ends: the handler goes on at the next turn of
        the loop, not two turns later (a task's done callbacks are themselves scheduled)."""
        try:
            return await body
        finally:
            self._wake()

    def _ended(self, body: Coroutine[Any, Any, list[Event]], _: object) -> None:
        # ``body`` was started in its task's first step, so this closes a finished coroutine
        # (a no-op); kept so that no path can leave it un-awaited for the collector to warn
        body.close()
        self._wake()

    def _wake(self, _: object = None) -> None:
        settled = self._settled
        if settled is not None and not settled.done():
            settled.set_result(None)

    async def next(self) -> list[Event]:
        """Wait until at least one body settles; the events they wrote, in log order. The
        groups of bodies still running no longer defer their completions."""
        if not self.tasks:
            return []
        # No turn of the loop is needed before returning: every body took its first step in
        # :meth:`start`, where it registered itself as running (``RunSession.run_inline``).
        # (Bodies whose tasks took their first step in a later turn needed one: returned
        # before it, the handler drove on seeing its own new step started with no body
        # running, and re-ran it as owned recovery, one body twice.) A batch started while
        # the handler handles an error takes its first steps in the next turn instead (see
        # ``EagerTask``), all of them: then none is done here, and the first to end wakes
        # this wait only in the turn after, when every body of the batch has run its first.
        done = [task for task in self.tasks if task.done()]
        while not done:
            self._settled = asyncio.get_running_loop().create_future()
            try:
                await self._settled
            finally:
                self._settled = None
            done = [task for task in self.tasks if task.done()]
        events: list[Event] = []
        for task in done:
            self.tasks.pop(task, None)
            events += task.result()
        for group in self.tasks.values():
            group.defer = False
        return sorted(events, key=lambda e: e.seq)

    async def drain(self) -> None:
        """Wait for every body (before the delivery is settled). Their completions are
        recorded by the bodies themselves; an error is raised after all settled."""
        while self.tasks:
            await self.next()

    async def settle(self, *, cancel: bool = False) -> None:
        """On the way out of the handler: wait for every body, cancelling them first when the
        handler itself was cancelled (a forced close). Errors were the handler's to raise."""
        tasks = list(self.tasks)
        self.tasks.clear()
        if not tasks:
            return
        if cancel:
            for task in tasks:
                task.cancel()
        cancelled = False
        while True:
            try:
                await asyncio.wait(tasks)
                break
            except asyncio.CancelledError:
                # a forced close cancels the handler again while a body runs on: a body can
                # lose its cancel in a world call as the handler can, so it is passed on, and
                # the handler still never ends under a running body
                cancelled = True
                for task in tasks:
                    task.cancel()
        if cancelled:
            raise asyncio.CancelledError
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: the handler already failed or returned

    @staticmethod
    def must_settle_first(replay: Replay) -> bool:
        """The run is about to unwind (cancelled, or failed with something to compensate):
        never under a body that is still running (seed 000's decision table)."""
        root = replay.root
        return (
            replay.ending.phase != "running"
            or replay.ending.cancel_requested
            or (replay.finished and root is not None and root.failed())
        )
