"""Pausing a run and lifting the pause: one ``run_paused`` or ``run_unpaused`` each, recorded
with who asked and why, and the wake that lets the run go on after an unpause.

A pause records the status it was put over (pending or running), read in the same fenced
append that writes it, so the unpause returns the run there and nothing else can lift it. A
worker that reads a paused run starts nothing new (``_core.planning.Paused``); a body already
running records its result, and a wait that fell due meanwhile completes on the unpause's
wake. ``Client.pause`` and ``Client.unpause`` ask for a person; a step whose policy says
``on_exhausted="pause"`` pauses its run when its attempts run out (``_engine.ending``).
"""

from __future__ import annotations

from collections.abc import Callable

from .._core.dispatch import FLOW_TOPIC
from .._core.events import (
    PAUSABLE,
    STATUS_AFTER,
    STATUS_BEFORE,
    Event,
    EventType,
    NewEvent,
    RunStatus,
)
from .._core.messages import Wake, WakeReason
from .._core.projections import RunInfo, RunPaused, payload
from ..errors import RunNotFoundError, RunTerminalError, SequenceConflictError, WaylineError
from .seam import World
from .sending import send


def paused_from(events: list[Event]) -> RunStatus | None:
    """The status the pause in force was put over; None when the run is not paused."""
    before: RunStatus | None = None
    for event in events:
        if event.type is EventType.RUN_PAUSED:
            p = payload(event)
            assert isinstance(p, RunPaused)
            before = p.before
        elif event.type is EventType.RUN_UNPAUSED:
            before = None
    return before


def pause_event(status: RunStatus, reason: str, by: str, **more: str) -> NewEvent:
    """The ``run_paused`` a run of ``status`` (pending or running) records."""
    data = {"reason": reason, "by": by, STATUS_BEFORE: str(status), **more}
    return NewEvent(EventType.RUN_PAUSED, data=data)


def unpause_event(events: list[Event], reason: str, by: str) -> NewEvent:
    """The ``run_unpaused`` that lifts the pause in force in ``events``."""
    back = paused_from(events) or RunStatus.RUNNING
    return NewEvent(
        EventType.RUN_UNPAUSED, data={"reason": reason, "by": by, STATUS_AFTER: str(back)}
    )


async def pause_run(world: World, run_id: str, reason: str, by: str, rounds: int) -> bool:
    """Record the pause; False when the run was paused already (nothing recorded). Raises
    ``RunTerminalError`` for a run that has ended and ``WaylineError`` for one that is not
    pending or running (a blocked run, or one being compensated or cancelled)."""

    def decide(info: RunInfo, events: list[Event]) -> NewEvent | None:
        if info.status is RunStatus.PAUSED:
            return None
        if any(e.type is EventType.RUN_CANCEL_REQUESTED for e in events):
            raise WaylineError(f"run {run_id} is being cancelled; a pause would not hold it")
        if info.status not in PAUSABLE:
            raise WaylineError(
                f"run {run_id} is {info.status}; only a pending or running run can be paused"
            )
        return pause_event(info.status, reason, by)

    return await _fenced(world, run_id, decide, rounds, "pause")


async def unpause_run(world: World, run_id: str, reason: str, by: str, rounds: int) -> bool:
    """Lift the pause and wake the run; False when it was not paused (nothing recorded).
    Raises ``RunTerminalError`` for a run that has ended."""

    def decide(info: RunInfo, events: list[Event]) -> NewEvent | None:
        if info.status is not RunStatus.PAUSED:
            return None
        return unpause_event(events, reason, by)

    recorded = await _fenced(world, run_id, decide, rounds, "unpause")
    if recorded:
        # no key: a wake under a key still held by a message sent while the run was paused
        # would be dropped, and that message was acked without driving the run
        await send(world, FLOW_TOPIC, Wake(run_id, WakeReason.UNPAUSE).to_wire())
    return recorded


async def _fenced(
    world: World,
    run_id: str,
    decide: Callable[[RunInfo, list[Event]], NewEvent | None],
    rounds: int,
    verb: str,
) -> bool:
    """Read the run, decide, and append expecting the log as read (a writer in between sends
    it round again, at most ``rounds`` times)."""
    for _ in range(rounds):
        info, events = await world.read_run(run_id)
        if info is None:
            raise RunNotFoundError(f"no run {run_id}")
        if info.status.terminal:
            raise RunTerminalError(f"run {run_id} has ended ({info.status}); nothing to {verb}")
        event = decide(info, events)
        if event is None:
            return False
        try:
            await world.append(run_id, [event], expected_seq=info.last_seq)
            return True
        except SequenceConflictError:
            continue
        except RunTerminalError as err:
            raise RunTerminalError(f"run {run_id} has ended; nothing to {verb}") from err
    raise SequenceConflictError(f"run {run_id} kept moving under {rounds} {verb}s", last_seq=0)
