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
import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._core.events import RunStatus
from .._core.messages import Wake, WakeReason
from .ports import (
    Blobs,
    ChangeFeed,
    Clock,
    EndListener,
    EventLog,
    HookPayloads,
    Lifecycle,
    RateBuckets,
    Registry,
    Retention,
    Slots,
    Streams,
    WorkQueue,
)
from .ports import Delivery as Delivery
from .ports import HookInfo as HookInfo
from .ports import QueueDepth as QueueDepth
from .ports import RunWatch as RunWatch
from .routing import FLOW_TOPIC as FLOW_TOPIC
from .routing import STEP_TOPIC as STEP_TOPIC
from .routing import Router
from .single_flight import SingleFlight

if TYPE_CHECKING:
    from .terminal_hints import TerminalHints

# FLOW_TOPIC and STEP_TOPIC: see ``ports.queue``.


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
    RateBuckets,
    Retention,
    Blobs,
    Clock,
    abc.ABC,
):
    """Durable event log + queue: the composition of the ports (``world.ports``). See the
    module docstring and DESIGN "The World contract".

    A world implements every port; what a world holds for this process alone (single-flight,
    routing, the listeners of the ends it hears) is kept here. The terminal hints' bookkeeping
    (who waits for a run's end, which ends were heard) is above the seam, the client's
    (``terminal_hints``); a world only tells it what it hears (:meth:`on_ended`)."""

    def __init__(self) -> None:
        # In-process single-flight for step bodies (seed 000). One per world instance, not per
        # process, so two workers on two worlds in one process stay apart.
        self.single_flight = SingleFlight()
        self.router = Router(self.get_run)
        # Who is told of the ends this world hears (``on_ended``): the terminal hints of its
        # clients, whose bookkeeping lives above the seam (``terminal_hints``).
        self._end_listeners: list[EndListener] = []

    terminal_hints: bool = False
    """True when this world tells its end listeners (:meth:`on_ended`) of every writer's
    terminal append, not only this instance's, and of every hint that may have been lost: a
    waiter then polls only as a safety net."""

    hears_every_end: bool = False
    """True when this world hears every terminal append, whoever waits (so that
    ``TerminalHints.heard_ended`` knows the recent ends): a handle fresh from ``start`` can
    then wait for its hint before its first read. Elsewhere that first read is made at once."""

    def on_ended(self, listener: EndListener) -> Callable[[], None]:
        self._end_listeners.append(listener)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._end_listeners.remove(listener)

        return stop

    def _wake_terminal(self, run_id: str) -> None:
        """This world heard a terminal append to the run: every listener is told."""
        for listener in list(self._end_listeners):
            listener.ended(run_id)

    def _hints_may_be_lost(self) -> None:
        """A hint may have gone missing: every listener is told (its waiters read once)."""
        for listener in list(self._end_listeners):
            listener.may_be_lost()

    def _waited_ends(self) -> set[str]:
        """The runs some listener waits for now."""
        return {run_id for listener in self._end_listeners for run_id in listener.waited()}

    # Deprecated: the terminal hints are the client's now (``terminal_hints.TerminalHints``).
    def watch_terminal(self, run_id: str) -> asyncio.Future[None]:
        """Deprecated: ``TerminalHints.of(world).watch``."""
        return _deprecated(self, "watch_terminal", "watch").watch(run_id)

    def unwatch_terminal(self, run_id: str, fut: asyncio.Future[None]) -> None:
        """Deprecated: ``TerminalHints.of(world).unwatch``."""
        _deprecated(self, "unwatch_terminal", "unwatch").unwatch(run_id, fut)

    def heard_ended(self, run_id: str) -> bool:
        """Deprecated: ``TerminalHints.of(world).heard_ended``."""
        return _deprecated(self, "heard_ended", "heard_ended").heard_ended(run_id)

    def ends_mark(self) -> tuple[int, int]:
        """Deprecated: ``TerminalHints.of(world).ends_mark``."""
        return _deprecated(self, "ends_mark", "ends_mark").ends_mark()

    def may_have_ended_since(self, run_id: str, mark: tuple[int, int]) -> bool:
        """Deprecated: ``TerminalHints.of(world).may_have_ended_since``."""
        book = _deprecated(self, "may_have_ended_since", "may_have_ended_since")
        return book.may_have_ended_since(run_id, mark)


def _deprecated(world: World, old: str, new: str) -> TerminalHints:
    from .terminal_hints import TerminalHints

    warnings.warn(
        f"World.{old} is deprecated: use wayline.world.terminal_hints.TerminalHints.of(world)"
        f".{new} (the client's terminal hints, Client.ends)",
        DeprecationWarning,
        stacklevel=3,
    )
    return TerminalHints.of(world)


def flow_message(
    world: World, run_id: str, reason: WakeReason, *, after_own_append: bool = False
) -> dict[str, Any]:
    """A flow message's payload; ``after_own_append``: sent right after the caller's own
    append to the run, so it carries the world's ``logMark`` when it holds one
    (:meth:`World.log_mark`)."""
    mark = world.log_mark(run_id) if after_own_append else None
    return Wake(run_id, reason, log_mark=mark).to_wire()
