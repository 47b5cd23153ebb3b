"""Asking a run to stop: one ``run_cancel_requested`` however often it is asked, and the
run's cancel wake. ``Client.cancel`` asks for a person; a cancelled parent's unwind asks for
each child still running (``_engine.ending.cancel_children``). A cancel of a paused run lifts
its pause in the same write."""

from __future__ import annotations

from .._core.dispatch import FLOW_TOPIC
from .._core.events import RUN_TERMINAL_EVENTS, EventType, NewEvent
from .._core.messages import Wake, WakeReason
from ..errors import EntityConflictError, RunNotFoundError, SequenceConflictError
from .pausing import paused_from, unpause_event
from .seam import World
from .sending import send


async def ask_to_cancel(world: World, run_id: str, reason: str, rounds: int) -> bool:
    """Record the request once (a request already in the log is not written again) and send
    the wake; False when the run has ended. The append expects the log as read: a writer in
    between sends it round again, at most ``rounds`` times (then ``SequenceConflictError``).
    Raises ``RunNotFoundError`` when there is no such run."""
    events = await world.list_events(run_id)
    for _ in range(rounds):
        if not events:
            raise RunNotFoundError(f"no run {run_id}")
        if events[-1].type in RUN_TERMINAL_EVENTS:
            return False
        if any(e.type is EventType.RUN_CANCEL_REQUESTED for e in events):
            break  # asked before: only its wake is sent again
        request = NewEvent(EventType.RUN_CANCEL_REQUESTED, data={"reason": reason})
        batch = [request]
        if paused_from(events) is not None:
            # A cancel is a later decision than the pause: it lifts the pause in the same
            # write, so the run unwinds as any cancelled run (and the log says why it moved).
            batch.insert(0, unpause_event(events, f"cancelled: {reason}", "cancel"))
        last = events[-1].seq
        try:
            await world.append(run_id, batch, expected_seq=last)
            break
        except (SequenceConflictError, EntityConflictError):
            events += await world.list_events(run_id, after_seq=last)
    else:
        raise SequenceConflictError(
            f"run {run_id} kept moving under {rounds} cancel requests", last_seq=0
        )
    await send(
        world,
        FLOW_TOPIC,
        Wake(run_id, WakeReason.CANCEL).to_wire(),
        idempotency_key=f"{run_id}:cancel",
    )
    return True
