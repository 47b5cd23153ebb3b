"""A step's completion carried by the run's next write.

A sequential workflow's inline step costs two writes: ``step_completed`` for one step, then
``step_created`` + ``step_started`` for the next. The completion need not be durable before
the workflow code between the two steps runs (that code is replayed on every recovery and has
no side effects), only before anything that depends on it leaves the process: the next step's
body, a queue message, an ack. So when the last body of an inline batch finishes, the handler
feeds its completion to the live replay *provisionally* and writes it at the head of the next
decision batch, fenced on the seq the log had (``expected_seq``): one write per step.

The fence is what keeps it exact. The replay saw the completion at seq ``durable_seq + 1``; the
fenced write lands it there or not at all. If anything else reached the log first (a hook
payload, a cancel request, another replayer), the completion is written alone and the replay is
rebuilt from the log, so no decision made on an order the log does not have is ever written.
A workflow that reads time (``now``, ``sleep``, timeouts) during a provisional event cannot be
given the event's world timestamp before it is written: it stops with ``NeedsStamp``, the
completion is written alone, and the replay is rebuilt without deferral for the rest of the
delivery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._core.events import Event, EventType, NewEvent
from .._core.replay import Replay
from ..errors import (
    EntityConflictError,
    EntityMissingError,
    RunTerminalError,
    WorldError,
    WorldUnavailableError,
)
from ..world import World
from .step_runner import Completed, Failed, Outcome, Retry


class Rebuild(Exception):
    """The live replay no longer matches the log: build a fresh one and drive again."""


@dataclass(slots=True)
class InlineBatch:
    """The bodies of one inline batch; the last to finish may defer its completion."""

    running: int
    defer: bool
    deferred: NewEvent | None = None
    writing: int = 0
    """Bodies of the batch whose own outcome is being written: the last body to finish does
    not defer while one is. Its provisional completion is fed at the seq after the log the
    replay has seen, which a sibling's write still under way takes first: the carrying
    write then found the log moved, and the replay was rebuilt under running bodies."""

    def finished(self, cid: str, outcome: Outcome | None, *, eligible: bool) -> bool:
        """Count a finished body; True when its completion is deferred (it was the last of
        the batch to finish, no sibling's outcome is still being written, and deferring is
        allowed for it)."""
        self.running -= 1
        if (
            not self.defer
            or not eligible
            or self.running
            or self.writing
            or self.deferred is not None
            or not isinstance(outcome, Completed | Failed)
        ):
            return False
        self.deferred = outcome_event(cid, outcome)
        return True


def outcome_event(cid: str, outcome: Outcome) -> NewEvent:
    if isinstance(outcome, Completed):
        return NewEvent(EventType.STEP_COMPLETED, cid, {"result": outcome.result})
    if isinstance(outcome, Retry):
        return NewEvent(
            EventType.STEP_RETRYING,
            cid,
            {"error": outcome.error, "retryAfter": outcome.retry_after, **outcome.schedule},
        )
    assert isinstance(outcome, Failed)
    return NewEvent(EventType.STEP_FAILED, cid, {"error": outcome.error})


async def flush(world: World, replay: Replay) -> None:
    """Write the provisional events alone. Raises :class:`Rebuild` unless they landed at the
    seqs the replay fed them with."""
    if not replay.provisional:
        return
    pending = list(replay.provisional)
    try:
        stored = await world.append(replay.run_id, pending)
    except (EntityConflictError, RunTerminalError, EntityMissingError):
        stored = []  # settled by another attempt, or the run ended: the log says what holds
    if stored and stored[0].seq == replay.durable_seq + 1:
        replay.settle_provisional(stored[-1].created_at)
        return
    replay.provisional.clear()
    raise Rebuild


async def append_batch(
    world: World, replay: Replay, batch: Sequence[NewEvent], *, fenced: bool = False
) -> list[Event]:
    """Append a decision batch, carrying the provisional events in the same write when the log
    has not moved; the events returned are the batch's own. ``fenced``: the batch itself is
    written only on the log it was decided on (else :class:`SequenceConflictError`), so that a
    cancel request (or a payload) that reached the log meanwhile is seen before anything new
    starts; without it (a run's end) it is written after whatever came in between."""
    fence = replay.last_seq if fenced else None
    if not replay.provisional:
        return await world.append(replay.run_id, batch, expected_seq=fence)
    pending = list(replay.provisional)
    try:
        stored = await world.append(
            replay.run_id, [*pending, *batch], expected_seq=replay.durable_seq
        )
    except WorldUnavailableError:
        raise
    except WorldError:
        await flush(world, replay)  # raises Rebuild if the log moved
        fence = replay.last_seq if fenced else None
        return await world.append(replay.run_id, batch, expected_seq=fence)
    replay.settle_provisional(stored[0].created_at)
    return stored[len(pending) :]
