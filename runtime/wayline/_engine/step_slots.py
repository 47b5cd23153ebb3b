"""A step's concurrency slot (``@wayline.step(concurrency=wayline.Limit(...))``).

Such a step never runs inline (``StepDefinition.queued_only``): its queued delivery takes a
slot of the step's key in the world before the attempt's ``step_started``, renews the slot's
lease while the body runs, and gives it back when the body settles. The holder is the step of
its run (``run:stepId``), so a redelivery of the same step (its previous holder fenced or
dead) takes its own slot again at once, and a holder killed mid-body keeps a slot no longer
than the lease. A live holder that cannot renew stops its body before the lease it last proved
runs out (:class:`Slot`), so no other worker takes the slot while the body still runs.

A step that finds no free slot starts no attempt (no retry is spent) and its delivery is
handed back for a short pause (:meth:`World.release`: no delivery is counted). The run shows
it: ``blocked`` with ``waitingFor: concurrency`` naming the step, written once, and lifted by
the step that was named when it takes its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .._core.concurrency import Limit
from .._core.definitions import StepDefinition
from .._core.events import EventType, NewEvent, RunStatus
from .._core.projections import StepView
from .._core.rate_limits import RateLimit
from .._core.serde import error_message
from ..errors import (
    EntityConflictError,
    RunTerminalError,
    SequenceConflictError,
    WaylineError,
)
from ..world import RunInfo
from ..world.ports import EventLog, Slots
from . import fencing
from .step_runner import Failed
from .tasks import spawn

log = logging.getLogger("wayline.runtime")

CODE = "STEP_CONCURRENCY_LIMIT"
_PAUSE = 0.5
"""Seconds (jittered by half either way) a waiting step's delivery is handed back for: how
soon a freed slot is noticed, against one slot read per waiting step per pause."""
_MARK_TRIES = 5
"""Reads of a busy run's log a block or its lifting is decided on before it is left unshown."""


@dataclass(frozen=True, slots=True)
class Wait:
    """No free slot: the step waits (its delivery is handed back, nothing is spent)."""

    key: str
    holders: list[str]
    max: int


_CUT = 5 / 6
"""Of the lease, after the send of the last renewal the holder saw succeed, at which it cuts
its body off (the margin, a sixth of the lease, covers the timer firing late on a busy loop and
the other workers reading the server's time a little apart)."""
_LAST = 11 / 12
"""Of the lease, likewise, at which a body still running (a sync body in its thread, which no
cancel reaches) makes the process exit: past it, another worker may take the slot."""
_KEEP_POLL = 0.02
"""Seconds between looks at whether a body that outlived its handler has ended (a thread's
end sets no loop event)."""
_KEEPERS: set[asyncio.Task[Any]] = set()
"""The tasks keeping the slots of bodies that outlived their handlers (:meth:`Slot._keep`)."""
_SETTLE = 0.1
"""Seconds, at least, that cancelled async bodies get to end after their slot was found lost
before a body still running makes the process exit."""


@dataclass(slots=True)
class Slot:
    world: Slots
    key: str
    holder: str
    limit: Limit
    token: str | None = None
    """This take's token: renewals and the give-back act only on the slot while this take holds
    it (a redelivery of the step takes the same holder under a new one)."""
    proven: float = field(default_factory=lambda: time.monotonic())
    """When (monotonic) the holder sent the take or renewal that last succeeded: the world's
    lease runs from no earlier than that, so this holder may execute until ``proven + lease``
    on its own clock, whatever happened to its later renewals."""
    ended: bool = False
    """The body ended: the renewer stops (on this as well as on its cancel, which a world
    call that completes as it lands can lose: ``asyncio.wait_for`` before Python 3.12)."""
    cut: bool = False
    """The lease ran out unrenewed and the body was cut off: renewals stop."""
    _timer: asyncio.TimerHandle | None = field(default=None, init=False, repr=False)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Renew the lease while the body runs (every third of it); give the slot back when
        it ends. The body is cut off through the delivery's fence when the holder cannot show
        that it still holds the slot: a renewal finds it lost (this holder stalled past its
        lease and another took it), or none succeeded for five sixths of the lease, counted
        from the send of the last one that did (the holder is cut off from the world, and
        once the lease runs out another worker may take the slot)."""
        fence = fencing.current()
        self._arm(fence)
        renewer = asyncio.ensure_future(self._renew(fence))
        try:
            yield
        finally:
            if fence is not None and fence.executing():
                # A close cancelled the handler while a body that no cancel reaches (a sync
                # body in its thread) runs on, its delivery kept held: the slot is kept too,
                # renewed and under its timers, until the body ends, or another worker would
                # take it beside the body.
                log.warning(
                    "slot %r of %s is kept until its step body, which could not be cut off, ends",
                    self.key,
                    self.holder,
                )
                spawn(self._keep(fence, renewer), f"wayline-slot-keeper-{self.key}", _KEEPERS)
            else:
                await self._give_back(renewer)

    async def _keep(self, fence: fencing.Fence, renewer: asyncio.Future[None]) -> None:
        """Hold the slot (its renewer and timers run on) while a body under ``fence`` runs."""
        try:
            while fence.executing():  # noqa: ASYNC110 - thread ends set no loop event
                await asyncio.sleep(_KEEP_POLL)
        except asyncio.CancelledError:  # the loop ends with the body still running: the
            self._stop(renewer)  # slot is not given back beside it; its lease frees it
            raise
        await self._give_back(renewer)

    def _stop(self, renewer: asyncio.Future[None]) -> None:
        self.ended = True
        if self._timer is not None:
            self._timer.cancel()
        renewer.cancel()

    async def _give_back(self, renewer: asyncio.Future[None]) -> None:
        self._stop(renewer)
        with contextlib.suppress(asyncio.CancelledError):
            await renewer
        try:
            await self.world.release_slot(self.key, self.holder, token=self.token)
        except WaylineError as err:  # its lease frees it
            log.warning("could not give back slot %r of %s: %s", self.key, self.holder, err)

    def _arm(self, fence: fencing.Fence | None) -> None:
        """(Re)set the timer that cuts the body off ``_CUT`` of the lease after ``proven``."""
        if self._timer is not None:
            self._timer.cancel()
        delay = self.proven + self.limit.lease_seconds * _CUT - time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._expire, fence)

    def _expire(self, fence: fencing.Fence | None) -> None:
        if self.ended or self.cut:
            return
        self.cut = True
        lease = self.limit.lease_seconds
        reason = (
            f"concurrency slot {self.key!r} of {self.holder} not renewed for "
            f"{time.monotonic() - self.proven:.1f}s (lease {lease:g}s): another worker may "
            "take it soon"
        )
        self._lost(fence, reason)
        if fence is not None:
            delay = self.proven + lease * _LAST - time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(
                max(0.0, delay), self._outlived, fence, reason
            )

    def _doom(self, fence: fencing.Fence | None, reason: str) -> None:
        """The slot was found lost: its next holder may run already (a redelivery of this very
        step takes it under a new token), and the ``_expire`` timer, which ends on ``cut``,
        will not fire. A sync body in its thread, which no cancel reaches, makes the process
        exit at once; async bodies, cancelled by the trip, get until the lease this holder
        last proved nearly runs out (at least a moment) to end before the process exits."""
        if fence is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        if any(not done.is_set() for done in fence.threads):
            self._outlived(fence, reason)
            return
        delay = self.proven + self.limit.lease_seconds * _LAST - time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(
            max(_SETTLE, delay), self._outlived, fence, reason
        )

    def _outlived(self, fence: fencing.Fence, reason: str) -> None:
        if not self.ended:
            fencing.exit_if_executing(fence, reason, "the slot's next holder")

    def _lost(self, fence: fencing.Fence | None, reason: str) -> None:
        log.error("%s: its body is cut off", reason)
        if fence is not None:
            fence.trip(reason)

    async def _renew(self, fence: fencing.Fence | None) -> None:
        lease = self.limit.lease_seconds
        due = self.proven + lease / 3
        while not self.ended and not self.cut:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            sent = time.monotonic()
            try:
                won = await self.world.renew_slot(
                    self.key, self.holder, lease=lease, token=self.token
                )
            except WaylineError as err:
                log.warning("could not renew slot %r of %s: %s", self.key, self.holder, err)
                due = time.monotonic() + lease / 12  # soon again: the cut is not far
                continue
            if self.ended or self.cut:  # a body that ended is not cut off after the fact
                return
            if not won:
                self.cut = True
                lost = f"concurrency slot {self.key!r} of {self.holder} lost (lease {lease:g}s)"
                self._lost(fence, lost)
                self._doom(fence, lost)
                return
            self.proven = sent
            self._arm(fence)
            due = sent + lease / 3


async def take(
    world: Slots, run_id: str, step: StepView, definition: StepDefinition[..., Any]
) -> Slot | Wait | Failed:
    """The step's slot (held, with its lease), a :class:`Wait`, or the step's failure when
    its key function raised."""
    limit = definition.concurrency
    assert limit is not None
    key = step_key(step, definition, limit, "concurrency")
    if isinstance(key, Failed):
        return key
    return await acquire(world, key, f"{run_id}:{step.cid}", limit)


def step_key(
    step: StepView, definition: StepDefinition[..., Any], limit: Limit | RateLimit, kind: str
) -> str | Failed:
    """The key of this call of the step under ``limit``, or the step's failure (``<KIND>_KEY``,
    the step never runs) when decoding its arguments or the key function raised."""
    try:
        args, kwargs = definition.signature.decode_args(step.input, what=f"step {step.name!r}")
        return limit.key_for(f"step:{definition.name}", args, kwargs)
    except Exception as err:
        why = f"{type(err).__name__}: {error_message(err)}"
        message = f"the {kind.replace('_', ' ')} key of step {step.name!r} raised {why}"
        code = f"{kind.upper()}_KEY"
        return Failed({"name": "FatalError", "code": code, "message": message})


async def acquire(world: Slots, key: str, holder: str, limit: Limit) -> Slot | Wait:
    """Take a slot of ``key`` for ``holder`` under a fresh token (see the module's doc)."""
    token = secrets.token_hex(8)
    sent = time.monotonic()
    won, holders = await world.acquire_slot(
        key, holder, limit.max, lease=limit.lease_seconds, token=token
    )
    if not won:
        return Wait(key, holders, limit.max)
    return Slot(world, key, holder, limit, token=token, proven=sent)


def pause() -> float:
    return _PAUSE * random.uniform(0.5, 1.5)


async def show_waiting(world: EventLog, info: RunInfo, step: StepView, wait: Wait) -> None:
    """Mark the run ``blocked`` with ``waitingFor: concurrency`` naming the step, unless it
    already shows a waiting step (or is not simply running: an unwind keeps its status)."""
    message = (
        f"step {step.name!r} ({step.cid}) is waiting for a concurrency slot of {wait.key!r}: "
        f"{len(wait.holders)} of {wait.max} held by {', '.join(wait.holders)}"
    )
    data = {
        "code": CODE,
        "message": message,
        "waitingFor": "concurrency",
        "limit": wait.key,
        "step": step.name,
        "stepId": step.cid,
    }

    def block(now: RunInfo) -> NewEvent | None:
        if now.status is not RunStatus.RUNNING:
            return None
        log.info("run %s: %s", now.run_id, message)
        return NewEvent(EventType.RUN_BLOCKED, data=data)

    await mark(world, info, block)


def waiting(info: RunInfo) -> bool:
    """The run is blocked by a step waiting for a slot (only that step lifts it)."""
    return info.status is RunStatus.BLOCKED and (info.error or {}).get("code") == CODE


async def show_taken(world: EventLog, info: RunInfo, step: StepView, code: str = CODE) -> None:
    """Lift the run's block if it is this step's wait (of kind ``code``: a slot's, or a rate
    limit's token)."""

    def unblock(now: RunInfo) -> NewEvent | None:
        shown = now.error or {}
        if now.status is not RunStatus.BLOCKED or shown.get("code") != code:
            return None
        if shown.get("stepId") != step.cid:
            return None
        return NewEvent(EventType.RUN_UNBLOCKED)

    await mark(world, info, unblock)


async def mark(
    world: EventLog, info: RunInfo | None, decide: Callable[[RunInfo], NewEvent | None]
) -> None:
    """Append what ``decide`` makes of the run as last read, only onto that read
    (``expected_seq``): a block written meanwhile (a divergence, another step) is never
    overwritten or lifted by a decision made on an older read; the run is read again and
    decided anew. Best effort: the status is only shown, so a busy log may win."""
    for _ in range(_MARK_TRIES):
        if info is None:
            return
        event = decide(info)
        if event is None:
            return
        try:
            await world.append(info.run_id, [event], expected_seq=info.last_seq)
            return
        except (RunTerminalError, EntityConflictError):
            return
        except SequenceConflictError:
            info = await world.get_run(info.run_id)
