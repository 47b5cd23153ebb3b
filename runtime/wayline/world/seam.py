"""The World contract: the only thing the runtime talks to for durability.

A world offers an event log (append with validation and optimistic concurrency, list, runs,
hooks by token) and a queue (``enqueue`` with idempotency keys and delays; deliveries with a
stable message id and an attempt count), and more: ``World`` is the composition of the
small ports in ``world.ports``, one per thing asked of a store. Three worlds implement it
(the embedded SQLite one, JetStream, and the simulator's in-memory one), and one contract
suite per port (``tests/contract``) holds them all to it.
"""

from __future__ import annotations

import abc
import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .._core.events import RunStatus
from .ports import (
    ChangeFeed,
    Clock,
    EventLog,
    HookPayloads,
    Lifecycle,
    Registry,
    Retention,
    Slots,
    Streams,
    WorkQueue,
)
from .ports import Delivery as Delivery
from .ports import HookInfo as HookInfo
from .ports import RunWatch as RunWatch
from .routing import FLOW_TOPIC as FLOW_TOPIC
from .routing import STEP_TOPIC as STEP_TOPIC
from .routing import Router
from .single_flight import SingleFlight

# FLOW_TOPIC and STEP_TOPIC: see ``ports.queue``.

_HEARD_ENDED = 1024
"""Terminal hints remembered per world (run ids), for a result asked after the end."""


def terminal_statuses(statuses: Sequence[RunStatus] | None) -> list[str]:
    """The statuses a cleanup may take (all terminal ones by default); a live one is refused."""
    chosen = list(statuses) if statuses else [s for s in RunStatus if s.terminal]
    for status in chosen:
        if not RunStatus(status).terminal:
            raise ValueError(f"only terminal runs are cleaned up, not {status!r}")
    return [str(RunStatus(s)) for s in chosen]


class World(
    Lifecycle,
    EventLog,
    ChangeFeed,
    HookPayloads,
    WorkQueue,
    Registry,
    Streams,
    Slots,
    Retention,
    Clock,
    abc.ABC,
):
    """Durable event log + queue: the composition of the ports (``world.ports``). See the
    module docstring and DESIGN "The World contract".

    A world implements every port; what a world holds for this process alone (single-flight,
    routing, terminal hints) is kept here, above the ports."""

    def __init__(self) -> None:
        # In-process single-flight for step bodies (seed 000). One per world instance, not per
        # process, so two workers on two worlds in one process stay apart.
        self.single_flight = SingleFlight()
        self.router = Router(self.get_run)
        self._terminal_waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._heard_ended: OrderedDict[str, None] = OrderedDict()
        self._ends_heard = 0
        self._hint_losses = 0

    terminal_hints: bool = False
    """True when :meth:`watch_terminal` hears of every writer's terminal append, not only this
    instance's, and wakes every waiter when a hint may have been lost: a waiter then polls
    only as a safety net."""

    hears_every_end: bool = False
    """True when this world hears every terminal append, whoever waits (``heard_ended`` knows
    the recent ends): a handle fresh from ``start`` can then wait for its hint before its
    first read. Elsewhere that first read is made at once."""

    def watch_terminal(self, run_id: str) -> asyncio.Future[None]:
        """A future set when this world hears that the run may have ended: a hint, never a
        promise (the caller reads the run again). Watch before reading, so that an end
        between the read and the wait is not missed; :meth:`unwatch_terminal` after."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._terminal_waiters.setdefault(run_id, set()).add(fut)
        return fut

    def unwatch_terminal(self, run_id: str, fut: asyncio.Future[None]) -> None:
        waiters = self._terminal_waiters.get(run_id)
        if waiters is not None:
            waiters.discard(fut)
            if not waiters:
                del self._terminal_waiters[run_id]

    def _hints_may_be_lost(self) -> None:
        """A hint may have gone missing (the connection that carries them was lost, or a
        subscriber fell behind): every waiter wakes and reads once, rather than waiting for
        its poll."""
        self._hint_losses += 1
        for waiters in list(self._terminal_waiters.values()):
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def heard_ended(self, run_id: str) -> bool:
        """True when this world heard a terminal hint for the run lately (the last
        :data:`_HEARD_ENDED` runs), waiter or not (one of the tests of
        :meth:`may_have_ended_since`)."""
        return run_id in self._heard_ended

    def ends_mark(self) -> tuple[int, int]:
        """Where this world's hearing stands now, for :meth:`may_have_ended_since`."""
        return self._ends_heard, self._hint_losses

    def may_have_ended_since(self, run_id: str, mark: tuple[int, int]) -> bool:
        """False only when the run's end cannot have been heard since ``mark`` (taken when
        the run was known not to have ended) without this world knowing: it heard no hint
        for it, too few ends since to have forgotten one, and no hint was lost. A world
        that hears every end (``hears_every_end``) can then wait for the hint unread."""
        ends, losses = mark
        return (
            self.heard_ended(run_id)
            or self._ends_heard - ends >= _HEARD_ENDED
            or self._hint_losses != losses
        )

    def _wake_terminal(self, run_id: str) -> None:
        self._ends_heard += 1
        self._heard_ended[run_id] = None
        self._heard_ended.move_to_end(run_id)
        if len(self._heard_ended) > _HEARD_ENDED:
            self._heard_ended.popitem(last=False)
        for fut in self._terminal_waiters.pop(run_id, ()):
            if not fut.done():
                fut.set_result(None)


def flow_message(
    world: World, run_id: str, reason: str, *, after_own_append: bool = False
) -> dict[str, Any]:
    """A flow message's payload; ``after_own_append``: sent right after the caller's own
    append to the run, so it carries the world's ``logMark`` when it holds one
    (:meth:`World.log_mark`)."""
    payload: dict[str, Any] = {"runId": run_id, "reason": reason}
    mark = world.log_mark(run_id) if after_own_append else None
    if mark is not None:
        payload["logMark"] = mark
    return payload
