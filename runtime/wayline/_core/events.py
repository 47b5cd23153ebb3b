"""The event vocabulary and the transition rules every world enforces.

The event log is the truth: runs, steps, hooks and waits are views folded from it. Each event
has a dense 1-based sequence number within its run and a timestamp stamped by the world, never
by the caller. :func:`apply_transition` is the one place the rules live; every world calls it
so the embedded store and JetStream cannot disagree about what may be appended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import (
    EntityConflictError,
    EntityMissingError,
    RunNotFoundError,
    RunTerminalError,
    WorldError,
)


class EventType(StrEnum):
    RUN_CREATED = "run_created"
    RUN_STARTED = "run_started"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    RUN_CONTINUED_AS_NEW = "run_continued_as_new"
    """``wayline.continue_as_new(...)``: the run ended and its next run (``nextRunId``) goes on
    under the same identity (see ``_engine.continuation``)."""
    RUN_CANCEL_REQUESTED = "run_cancel_requested"
    RUN_COMPENSATING = "run_compensating"
    RUN_COMPENSATION_STUCK = "run_compensation_stuck"
    RUN_COMPENSATION_RESUMED = "run_compensation_resumed"
    RUN_COMPENSATION_ABANDONED = "run_compensation_abandoned"
    RUN_BLOCKED = "run_blocked"
    RUN_UNBLOCKED = "run_unblocked"
    RUN_PAUSED = "run_paused"
    """A person (or a step's ``on_exhausted="pause"``) paused the run: nothing new starts."""
    RUN_UNPAUSED = "run_unpaused"
    RUN_REDRIVEN = "run_redriven"
    """A person re-drove a failed run from its failed step (its correlation id), in place:
    the run is running again and the step gets a fresh attempt budget."""
    PATCH_MARKED = "patch_marked"
    """``wayline.patched(id)`` answered True on new history (seed: Temporal's markers)."""
    ATTRIBUTES_SET = "attributes_set"
    """``wayline.set_attributes(...)``: search attributes set (or, as None, removed)."""
    HISTORY_LARGE = "history_large"
    """The run's log passed ``WAYLINE_HISTORY_WARN_EVENTS``: recorded once, as a warning to
    end it with ``wayline.continue_as_new`` (see ``_engine.history_limits``)."""
    RUN_DEBOUNCED = "run_debounced"
    """A start of a debounced workflow (``wayline.Debounce``) collapsed into this run, which has
    not begun: its input replaces the run's, and its quiet period starts again."""
    STEP_CREATED = "step_created"
    STEP_STARTED = "step_started"
    STEP_RETRYING = "step_retrying"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    HOOK_CREATED = "hook_created"
    HOOK_RECEIVED = "hook_received"
    HOOK_DISPOSED = "hook_disposed"
    WAIT_CREATED = "wait_created"
    WAIT_COMPLETED = "wait_completed"
    CHILD_CREATED = "child_created"
    CHILD_COMPLETED = "child_completed"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    BLOCKED = "blocked"
    """No worker with the run's definition identity has come yet (the reason is in error).
    Shown over the run's own status, which a lift gives back (see ``stamped``)."""
    PAUSED = "paused"
    """Paused by a person or by a step out of attempts: no new step, child or wait starts
    until ``unpause`` returns the run to the status it was paused from (see ``pause``)."""
    COMPENSATING = "compensating"
    COMPENSATION_STUCK = "compensation_stuck"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED_AS_NEW = "continued_as_new"
    """Ended by ``wayline.continue_as_new``: its next run carries on (``RunInfo.continued_as``)."""
    CORRUPT = "corrupt"
    """Shown, never stored: the run's log holds an entry that does not decode (CORRUPT_LOG)."""

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_RUN


_TERMINAL_RUN = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED_AS_NEW}
)

RUN_TERMINAL_EVENTS = frozenset(
    {
        EventType.RUN_COMPLETED,
        EventType.RUN_FAILED,
        EventType.RUN_CANCELLED,
        EventType.RUN_CONTINUED_AS_NEW,
    }
)
STEP_TERMINAL_EVENTS = frozenset({EventType.STEP_COMPLETED, EventType.STEP_FAILED})

# Events that record a decision the workflow made from what it had read. They are appended
# with the writer's last-seen sequence so a decision taken on a stale view is refused (the
# writer catches up and decides again); see DESIGN "The event log is the truth".
DECISION_EVENTS = frozenset(
    {
        EventType.STEP_CREATED,
        EventType.HOOK_CREATED,
        EventType.WAIT_CREATED,
        EventType.CHILD_CREATED,
        EventType.RUN_COMPLETED,
        EventType.RUN_CONTINUED_AS_NEW,
    }
)


class EntityKind(StrEnum):
    STEP = "step"
    HOOK = "hook"
    WAIT = "wait"
    CHILD = "child"


_KIND_OF = {
    EventType.STEP_CREATED: EntityKind.STEP,
    EventType.STEP_STARTED: EntityKind.STEP,
    EventType.STEP_RETRYING: EntityKind.STEP,
    EventType.STEP_COMPLETED: EntityKind.STEP,
    EventType.STEP_FAILED: EntityKind.STEP,
    EventType.HOOK_CREATED: EntityKind.HOOK,
    EventType.HOOK_RECEIVED: EntityKind.HOOK,
    EventType.HOOK_DISPOSED: EntityKind.HOOK,
    EventType.WAIT_CREATED: EntityKind.WAIT,
    EventType.WAIT_COMPLETED: EntityKind.WAIT,
    EventType.CHILD_CREATED: EntityKind.CHILD,
    EventType.CHILD_COMPLETED: EntityKind.CHILD,
}


def entity_kind(event_type: EventType) -> EntityKind | None:
    return _KIND_OF.get(event_type)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event as a writer proposes it: no sequence, no timestamp (the world assigns both)."""

    type: EventType
    correlation_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Event:
    run_id: str
    seq: int
    type: EventType
    correlation_id: str | None
    data: Mapping[str, Any]
    created_at: float
    """World-stamped time, seconds since the epoch."""

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "seq": self.seq,
            "type": str(self.type),
            "correlationId": self.correlation_id,
            "data": dict(self.data),
            "createdAt": self.created_at,
        }


# Entity statuses, as strings so worlds can store them as they are.
STEP_PENDING, STEP_RUNNING, STEP_COMPLETED, STEP_FAILED = (
    "pending",
    "running",
    "completed",
    "failed",
)
HOOK_ACTIVE, HOOK_DISPOSED = "active", "disposed"
WAIT_WAITING, WAIT_COMPLETED = "waiting", "completed"
CHILD_RUNNING, CHILD_DONE = "running", "done"
_CREATES = frozenset(
    {
        EventType.STEP_CREATED,
        EventType.HOOK_CREATED,
        EventType.WAIT_CREATED,
        EventType.CHILD_CREATED,
    }
)


# A block is shown over the run's own status, which it keeps: a run blocked while it unwinds
# (a divergence, a worker with another definition) still unwinds once the block is lifted.
# The world records that status in the run_blocked event and the status a lift returns to in
# run_unblocked (``stamped``), so every fold of the log reads it from the one event, and every
# check judges a blocked run by it (``apply_transition``'s ``block``): a lift to another
# status is refused, and an append of an end or a start the status under the block does not
# allow.
STATUS_BEFORE = "statusBefore"
"""run_blocked's field: the status the run had before it was blocked."""
STATUS_AFTER = "status"
"""run_unblocked's field: the status the run returns to."""
_RESUMABLE = frozenset(
    {
        RunStatus.PENDING,
        RunStatus.RUNNING,
        RunStatus.PAUSED,  # a block over a pause is lifted back to the pause, never past it
        RunStatus.COMPENSATING,
        RunStatus.COMPENSATION_STUCK,
    }
)


def _resumable(value: Any) -> RunStatus | None:
    if value is None:
        return None
    status = RunStatus(value) if isinstance(value, str) else None
    if status not in _RESUMABLE:
        raise ValueError(f"a block is never lifted back to {value!r}")
    return status


def status_before_block(data: Mapping[str, Any] | None) -> RunStatus | None:
    """The status a block (run_blocked's data) was recorded over; None when a log written
    before it was recorded does not say."""
    return _resumable((data or {}).get(STATUS_BEFORE))


def status_after_lift(data: Mapping[str, Any]) -> RunStatus:
    """The status a run_unblocked returns the run to (``running`` when not recorded)."""
    return _resumable(data.get(STATUS_AFTER)) or RunStatus.RUNNING


def stamped(
    new: NewEvent, run_status: RunStatus | None, block: Mapping[str, Any] | None
) -> NewEvent:
    """``new`` as the world records it after ``run_status``; ``block`` is the data of the block
    in force (the blocked run's ``RunInfo.error``). A block records the status it is put over
    (a block over a block keeps the first one's), a lift the status it returns to (``running``
    when an older block did not record one). What a writer put there is replaced: only the
    world knows the run's status at the append."""
    if new.type is EventType.RUN_BLOCKED:
        data = {k: v for k, v in new.data.items() if k != STATUS_BEFORE}
        before = _in_force(block) if run_status is RunStatus.BLOCKED else run_status
        if before in _RESUMABLE:
            data[STATUS_BEFORE] = str(before)
        return NewEvent(new.type, new.correlation_id, data)
    if new.type is EventType.RUN_UNBLOCKED and run_status is RunStatus.BLOCKED:
        after = _in_force(block) or RunStatus.RUNNING
        return NewEvent(new.type, new.correlation_id, {**new.data, STATUS_AFTER: str(after)})
    return new


def _in_force(block: Mapping[str, Any] | None) -> RunStatus | None:
    try:
        return status_before_block(block)
    except ValueError:  # not what a world records: as if an older block
        return None


def _judged(run_status: RunStatus, block: Mapping[str, Any] | None) -> RunStatus | None:
    """The status a run's lifecycle event is judged by: its own; blocked, the one its block
    was put over, None when not known (a log from before blocks recorded it, or no ``block``
    given): such a run is judged by the block alone, as it always was."""
    return _in_force(block) if run_status is RunStatus.BLOCKED else run_status


def _over(run_status: RunStatus, block: Mapping[str, Any] | None) -> str:
    under = _in_force(block) if run_status is RunStatus.BLOCKED else None
    return "" if under is None else f" (it is blocked over {under})"


# A pause is recorded over a pending or running run and remembers which (``statusBefore``,
# written by the one who pauses, from a fenced read of the log); the unpause returns the run
# there (its ``status``). Nothing else may lift it, so a worker's block or unblock never
# ends a pause a person asked for.
PAUSABLE = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
PAUSABLE_BEFORE_BEGIN = frozenset({RunStatus.PENDING, RunStatus.PAUSED})
"""The statuses of a run that may not have begun: what takes a debounced start's input."""


def _pause_transition(run_status: RunStatus, event: NewEvent | Event) -> RunStatus:
    if event.type is EventType.RUN_PAUSED:
        if run_status is RunStatus.PAUSED:
            raise EntityConflictError("run is already paused")
        if run_status not in PAUSABLE:
            raise EntityConflictError(f"run is {run_status}; only a pending or running run pauses")
        before = event.data.get(STATUS_BEFORE)
        if before is not None and before != str(run_status):
            raise EntityConflictError(f"run is {run_status}, not {before} as its pause records")
        return RunStatus.PAUSED
    if run_status is not RunStatus.PAUSED:
        raise EntityConflictError(f"run is {run_status}, not paused")
    after = event.data.get(STATUS_AFTER)
    # Not ``after not in (None, *(str(s) for s in PAUSABLE))``: mypyc (tools/mypyc_build.py)
    # stops with an internal error on a starred generator inside a tuple display.
    if after is not None and after not in [str(s) for s in PAUSABLE]:
        raise EntityConflictError(f"an unpause returns a run to pending or running, not {after}")
    return RunStatus(after) if isinstance(after, str) else RunStatus.RUNNING


_RUN_NOTES = frozenset(
    {
        EventType.RUN_CANCEL_REQUESTED,
        EventType.PATCH_MARKED,
        EventType.ATTRIBUTES_SET,
        EventType.HISTORY_LARGE,
    }
)
"""Events that change neither the run's status nor an entity's."""


def apply_transition(
    run_status: RunStatus | None,
    entity_status: str | None,
    event: NewEvent | Event,
    block: Mapping[str, Any] | None = None,
    *,
    appending: bool = False,
) -> tuple[RunStatus, str | None]:
    """Validate one append and return the run's and the entity's status after it.

    ``run_status`` is None when the run does not exist; ``entity_status`` is None when the
    event's correlation id has no entity yet. ``block`` is the data of the block in force
    while the run is blocked (its last ``run_blocked``'s, what ``stamped`` takes): a blocked
    run's lift and next block are judged by the status recorded under it (see ``_judged``).
    Its start and end are judged so only ``appending`` (the world's own appends): the
    version before wrote a start or an end over such a block (a second delivery's start, a
    cancel racing a finishing replay), and a log it wrote must still read. Raises a typed
    :class:`WorldError`.
    """
    ends_by = block if appending else None  # what a start or an end over a block is judged by
    t = event.type
    if t is EventType.RUN_CREATED:
        if run_status is not None:
            raise EntityConflictError("run already exists")
        return RunStatus.PENDING, None
    if run_status is None:
        raise RunNotFoundError("run does not exist")
    if t is EventType.RUN_REDRIVEN:
        return _redrive_transition(run_status, entity_status, event)
    if run_status.terminal:
        raise RunTerminalError(f"run is {run_status}; nothing more is appended")
    if t is EventType.RUN_STARTED:
        if _judged(run_status, ends_by) not in (None, RunStatus.PENDING):
            raise EntityConflictError(f"run already started{_over(run_status, ends_by)}")
        return RunStatus.RUNNING, None
    if t in _RUN_NOTES:
        return run_status, None
    if t is EventType.RUN_DEBOUNCED:
        # A paused run may not have begun (paused while pending): its starter reads that in
        # the run's log (no ``run_started``) and appends fenced on the log's last seq, so a
        # begin in between refuses the append. Any other status: it began, a start is a new run.
        if run_status not in PAUSABLE_BEFORE_BEGIN:
            raise EntityConflictError(f"run is {run_status}: its input is read already")
        return run_status, None
    if t in (EventType.RUN_PAUSED, EventType.RUN_UNPAUSED):
        return _pause_transition(run_status, event), None
    if t in (EventType.RUN_BLOCKED, EventType.RUN_UNBLOCKED):
        return _block_transition(run_status, event, block), None
    if t is EventType.RUN_COMPENSATING:
        return _unwind_transition(run_status, appending), None
    if t is EventType.RUN_COMPENSATION_STUCK:
        if run_status is not RunStatus.COMPENSATING:
            raise EntityConflictError(f"run is {run_status}, not compensating")
        return RunStatus.COMPENSATION_STUCK, None
    if t in (EventType.RUN_COMPENSATION_RESUMED, EventType.RUN_COMPENSATION_ABANDONED):
        if run_status is not RunStatus.COMPENSATION_STUCK:
            raise EntityConflictError(f"run is {run_status}, not waiting on a stuck compensation")
        return (
            RunStatus.COMPENSATING if t is EventType.RUN_COMPENSATION_RESUMED else run_status
        ), None
    if t in (EventType.RUN_COMPLETED, EventType.RUN_CONTINUED_AS_NEW):
        if _judged(run_status, ends_by) in (RunStatus.COMPENSATING, RunStatus.COMPENSATION_STUCK):
            raise EntityConflictError(
                f"a compensating run cannot complete{_over(run_status, ends_by)}"
            )
        if t is EventType.RUN_CONTINUED_AS_NEW:
            return RunStatus.CONTINUED_AS_NEW, None
        return RunStatus.COMPLETED, None
    if t is EventType.RUN_FAILED:
        return RunStatus.FAILED, None
    if t is EventType.RUN_CANCELLED:
        return RunStatus.CANCELLED, None

    if t is EventType.STEP_STARTED and appending:
        _refuse_a_start_over_a_pause(run_status)
    kind = _KIND_OF.get(t)
    if kind is None:  # pragma: no cover - exhaustive over EventType
        raise WorldError(f"unknown event type {t!r}")
    return run_status, _entity_transition(kind, entity_status, event)


def _refuse_a_start_over_a_pause(run_status: RunStatus) -> None:
    """Raise when a step attempt's start is appended over a pause. A worker that read the log
    before a pause may start an attempt after it: owned recovery re-stamps the start of a step
    whose delivery died mid-body with an append not fenced on the log it read (simulator seed
    285), so the world refuses it, as it refuses an unwind over a pause; the delivery is handed
    back and the step starts after the unpause. A paused run runs no compensation (a cancel
    lifts the pause in its own write), so every start refused here is a forward step's. Only
    the world's own appends are judged so: a log an older version wrote still reads."""
    if run_status is RunStatus.PAUSED:
        raise EntityConflictError("run is paused; no step attempt starts until it is unpaused")


def _unwind_transition(run_status: RunStatus, appending: bool) -> RunStatus:
    """The run's status after a ``run_compensating``; raises when the run is unwound already,
    or when it is paused and this is a new append."""
    if run_status in (RunStatus.COMPENSATING, RunStatus.COMPENSATION_STUCK):
        raise EntityConflictError("run is already compensating")
    if appending and run_status is RunStatus.PAUSED:
        # A worker that read the log before a pause may fail the run in its own code after
        # it: its unwind would start compensation bodies in a paused run, and no unpause
        # could follow (a compensating run is not paused). The worker reads the pause and
        # waits; the unpause's wake begins the unwind. A cancel lifts the pause in its own
        # write, so a cancelled run's unwind is never refused here. A log an older version
        # wrote with an unwind over a pause still reads.
        raise EntityConflictError("run is paused; its unwind begins when it is unpaused")
    return RunStatus.COMPENSATING


def _redrive_transition(
    run_status: RunStatus, entity_status: str | None, event: NewEvent | Event
) -> tuple[RunStatus, str]:
    """A redrive reopens a failed run (the one append a terminal run takes) and its failed
    step, which goes back to pending for a fresh attempt (docs/day2.md, "Fork and
    redrive")."""
    if run_status is not RunStatus.FAILED:
        raise EntityConflictError(f"run is {run_status}; only a failed run is redriven")
    if not event.correlation_id:
        raise WorldError("run_redriven needs the failed step's correlation id")
    if entity_status != STEP_FAILED:
        raise EntityConflictError(
            f"step {event.correlation_id} is {entity_status or 'not in the log'}, not failed"
        )
    return RunStatus.RUNNING, STEP_PENDING


def _block_transition(
    run_status: RunStatus, event: NewEvent | Event, block: Mapping[str, Any] | None
) -> RunStatus:
    """The run's status after a ``run_blocked`` or a ``run_unblocked`` (see
    ``apply_transition``); raises when the status it records is not the one under the block
    in force."""
    if event.type is EventType.RUN_BLOCKED:
        before = status_before_block(event.data)
        was = _judged(run_status, block)
        if before is not None and was is not None and before != was:
            shown = f"blocked over {was}" if run_status is RunStatus.BLOCKED else run_status
            raise EntityConflictError(f"run is {shown}, not {before} as its block records")
        return RunStatus.BLOCKED
    if run_status is not RunStatus.BLOCKED:
        raise EntityConflictError(f"run is {run_status}, not blocked")
    after = status_after_lift(event.data)
    # A lift that records no status is an older version's (a rolling upgrade: the block may
    # be a newer one's): it returns the run to running, as that version folded it.
    under = _in_force(block)
    if event.data.get(STATUS_AFTER) is not None and under is not None and after != under:
        raise EntityConflictError(
            f"run is blocked over {under}; a lift returns it there, not to {after}"
        )
    return after


def _entity_transition(kind: EntityKind, entity_status: str | None, event: NewEvent | Event) -> str:
    """A step's, hook's, wait's or child's status after ``event``; raises when not allowed."""
    t = event.type
    if not event.correlation_id:
        raise WorldError(f"{t} needs a correlation id")
    if t in _CREATES:
        if entity_status is not None:
            raise EntityConflictError(f"{kind} {event.correlation_id} already created")
        initial = {
            EntityKind.STEP: STEP_PENDING,
            EntityKind.HOOK: HOOK_ACTIVE,
            EntityKind.CHILD: CHILD_RUNNING,
        }
        return initial.get(kind, WAIT_WAITING)
    if entity_status is None:
        raise EntityMissingError(f"{kind} {event.correlation_id} was never created")

    if kind is EntityKind.STEP:
        if entity_status in (STEP_COMPLETED, STEP_FAILED):
            raise EntityConflictError(f"step {event.correlation_id} is already {entity_status}")
        nxt = {
            EventType.STEP_STARTED: STEP_RUNNING,
            EventType.STEP_RETRYING: STEP_PENDING,
            EventType.STEP_COMPLETED: STEP_COMPLETED,
            EventType.STEP_FAILED: STEP_FAILED,
        }[t]
        return nxt
    if kind is EntityKind.HOOK:
        if entity_status == HOOK_DISPOSED:
            raise EntityConflictError(f"hook {event.correlation_id} is disposed")
        return HOOK_DISPOSED if t is EventType.HOOK_DISPOSED else HOOK_ACTIVE
    if kind is EntityKind.CHILD:
        if entity_status == CHILD_DONE:
            raise EntityConflictError(f"child {event.correlation_id} already reported")
        return CHILD_DONE
    if entity_status == WAIT_COMPLETED:
        raise EntityConflictError(f"wait {event.correlation_id} already completed")
    return WAIT_COMPLETED
