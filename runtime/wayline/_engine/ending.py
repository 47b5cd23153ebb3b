"""How a run ends: its terminal event (a child then reports to its parent), failing it with a
framework error, terminating the children of a run that ended without waiting for them,
recording a step's outcome, and setting a malformed message aside."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._core import clock
from .._core.events import Event, EventType, NewEvent, RunStatus
from .._core.messages import Wake, WakeReason
from .._core.projections import fold
from .._core.replay import ChildRecord, Replay
from ..errors import (
    CorruptLogError,
    EntityConflictError,
    EntityMissingError,
    ErrorCause,
    RunNotFoundError,
    RunTerminalError,
    SequenceConflictError,
    WaylineError,
    WorldUnavailableError,
)
from ..world import FLOW_TOPIC, Delivery, RunInfo, World, flow_message
from ..world.cancel import ask_to_cancel
from ..world.pausing import pause_event
from ..world.sending import send
from .deferred import append_batch, outcome_event
from .messages import Verdict, malformed_verdict
from .step_runner import Failed, Outcome, Retry

log = logging.getLogger("wayline.runtime")


async def terminal(
    world: World, run_id: str, event: NewEvent, replay: Replay | None = None
) -> None:
    """Append a run's terminal event; a child then reports its end to its parent. With the
    live ``replay``, the attributes set since its last decision batch are recorded with the
    end, and its provisional events ride in the same write (see ``deferred``)."""
    events = [event] if replay is None else [*replay.new_attributes, event]
    await end_with(world, run_id, events, replay)


async def end_with(
    world: World, run_id: str, events: list[NewEvent], replay: Replay | None = None
) -> None:
    """:func:`terminal` with the events to write in one append, the run's end last (a
    planner's move names them: ``planning.FailNow``)."""
    event = events[-1]
    try:
        if replay is not None:
            await append_batch(world, replay, events)
        else:
            await world.append(run_id, events)
    except (RunTerminalError, RunNotFoundError, EntityConflictError):
        return
    if replay is not None and replay.parent is None and event.type in _ENDS:
        # no parent to report to: the end is the event this call just wrote (no read back)
        _log_end(run_id, _ENDS[event.type], event.data.get("error"), replay.workflow.name)
        return
    info = await world.get_run(run_id)
    if info is not None:
        _log_end(run_id, info.status, info.error, info.workflow)
        await report_to_parent(world, info)


_ENDS = {
    EventType.RUN_COMPLETED: RunStatus.COMPLETED,
    EventType.RUN_FAILED: RunStatus.FAILED,
}
"""The ends a live replay writes itself (``Handler._finish``)."""


def _log_end(run_id: str, status: RunStatus, error: Any, workflow: str) -> None:
    error = error if isinstance(error, Mapping) else {}
    # the recorded message is the user's text alone: a chain also says which step raised it
    cause = ErrorCause.from_recorded(error)
    text = cause if cause.step is not None or cause.run_id is not None else cause.message
    said = f": [{error.get('code') or error.get('name')}] {text}"
    log.info(
        "run %s %s%s",
        run_id,
        status,
        said if error else "",
        extra={"run_id": run_id, "workflow": workflow},
    )


async def report_to_parent(world: World, info: RunInfo) -> None:
    parent = info.attributes.get("parent")
    if not isinstance(parent, Mapping) or not info.status.terminal:
        return
    if info.status is RunStatus.CONTINUED_AS_NEW:
        return  # its next run carries the parent on: the chain's last run reports
    data: dict[str, Any] = {"status": str(info.status), "childRunId": info.run_id}
    if info.status is RunStatus.COMPLETED:
        data["output"] = info.output
    else:
        data["error"] = dict(info.error or {})
    parent_id, appended = str(parent["runId"]), True
    try:
        await world.append(
            parent_id, [NewEvent(EventType.CHILD_COMPLETED, str(parent["cid"]), data)]
        )
    except EntityConflictError:
        appended = False  # already reported: its wake may not have been sent (a crash), so again
    except (RunTerminalError, RunNotFoundError, EntityMissingError):
        return  # the parent ended, or is gone (then the child is an orphan)
    wake = flow_message(world, parent_id, WakeReason.CHILD, after_own_append=appended)
    await send(world, FLOW_TOPIC, wake, idempotency_key=f"{info.run_id}:reported")


_CANCEL_ROUNDS = 5


async def cancel_children(world: World, children: list[ChildRecord], reason: str) -> None:
    """A cancelled parent's unwind asks each child still running to stop: the child records
    the request once (as ``Client.cancel`` does) and unwinds on its own; its end, reported to
    the parent (``report_to_parent``), wakes the parent to go on. Sent again on each delivery
    of the parent until the child ends (the request is recorded once, the wake deduplicated)."""
    for child in children:
        assert child.run_id is not None
        try:
            await ask_to_cancel(world, child.run_id, reason, _CANCEL_ROUNDS)
        except CorruptLogError as err:  # fenced: the parent waits until a person repairs it
            log.warning("child run %s cannot be asked to cancel: %s", child.run_id, err)
        except RunNotFoundError:
            pass  # not created yet: the parent's replay creates it
        except SequenceConflictError as err:  # not asked: the parent's delivery is tried again
            raise WorldUnavailableError(str(err)) from err


async def fail_run(
    world: World,
    run_id: str,
    code: str,
    message: str,
    *,
    by: str | None = None,
    replay: Replay | None = None,
    **fields: Any,
) -> None:
    """End the run failed with ``code``; ``fields`` join the error (``holderRunId``, ...).
    ``by="worker"`` marks an end that no delivery of the run could drive to an unwind: its
    children still running are terminated here (``terminate_children``). With the live
    ``replay``, what it holds unwritten (attributes, a provisional completion) is written with
    the end (see ``terminal``)."""
    error = {"name": "WaylineError", "code": code, "message": message, **fields}
    log.error("run %s failed: [%s] %s", run_id, code, message)
    data: dict[str, Any] = {"error": error}
    if by is not None:
        data["by"] = by
    await terminal(world, run_id, NewEvent(EventType.RUN_FAILED, data=data), replay)
    if by == "worker":
        await terminate_children(world, run_id, "failed")


async def record_outcome(
    world: World, run_id: str, cid: str, outcome: Outcome, name: str = ""
) -> list[Event]:
    """Write a step's outcome; nothing when another attempt settled it first, or the run
    ended (cancelled). A retry is logged at INFO, with the run and the step. A retry that
    pauses the run (``on_exhausted="pause"``) is written with the pause, in one append."""
    try:
        if isinstance(outcome, Retry) and outcome.pause:
            return await _paused_with(world, run_id, cid, outcome, name)
        written = await world.append(run_id, [outcome_event(cid, outcome)])
    except (EntityConflictError, RunTerminalError, EntityMissingError):
        return []
    if isinstance(outcome, Retry):
        log.info(
            "run %s step %s (%s) will be retried in %.1fs: %s",
            run_id,
            name or cid,
            cid,
            max(0.0, outcome.retry_after - clock.now()),
            outcome.error.get("message", ""),
            extra={"run_id": run_id, "step": name or cid, "step_id": cid},
        )
    return written


async def _paused_with(
    world: World, run_id: str, cid: str, outcome: Retry, name: str
) -> list[Event]:
    """A step out of attempts under ``on_exhausted="pause"``: the retry and the pause it asks
    for, as one append fenced on the log read just before it. A run that cannot be paused
    now (a cancel was asked for, it unwinds, it is blocked or paused already) gets the step's
    failure instead, as without the policy: a retry written alone would give the step a
    fresh budget that nobody granted, and a pause over a cancel would hold a run nobody
    means to unpause."""
    error = outcome.error
    said = f"{error['name']}: " if error.get("name") else ""
    tried = error.get("attempt")
    after = "" if tried is None else f" (after {tried} attempt{'s' if tried != 1 else ''})"
    why = f"step {name or cid} ran out of attempts: {said}{error.get('message', '')}{after}"
    pause = pause_event(RunStatus.RUNNING, why, "retry", stepId=cid)
    for _ in range(3):  # a log that keeps moving under it: fail the step, as without a pause
        events = await world.list_events(run_id)
        view = fold(run_id, events)
        asked_to_stop = any(e.type is EventType.RUN_CANCEL_REQUESTED for e in events)
        if not asked_to_stop and view.status == RunStatus.PAUSED:
            # paused by someone already: the retry waits for that unpause, which lets the
            # step go on with the fresh budget a pause by this policy would have given it
            return await world.append(run_id, [outcome_event(cid, outcome)])
        if asked_to_stop or view.status != RunStatus.RUNNING:
            break
        try:
            written = await world.append(
                run_id, [outcome_event(cid, outcome), pause], expected_seq=events[-1].seq
            )
        except SequenceConflictError:
            continue  # the log moved (a cancel, another outcome): decide again on it
        except EntityConflictError:
            break
        log.warning("run %s paused: %s", run_id, why, extra={"run_id": run_id, "step_id": cid})
        return written
    return await world.append(run_id, [outcome_event(cid, Failed(error))])


async def malformed(world: World, delivery: Delivery, err: Exception) -> Verdict:
    """Set a malformed message aside (never a redelivery loop) and, when it names a run that
    is still live, wake that run. Wayline writes no malformed messages, so anyone who can
    publish could forge one: failing the run it names would let them end any run. The wake
    replays the run from its log, which re-derives every message it is due."""
    verdict = malformed_verdict(delivery, err)
    payload = delivery.payload or {}
    run_id = payload.get("runId") if isinstance(payload, dict) else None
    if isinstance(run_id, str) and run_id:
        info = await world.get_run(run_id)
        if info is not None and not info.status.terminal:
            await send(
                world,
                FLOW_TOPIC,
                Wake(run_id, WakeReason.MALFORMED).to_wire(),
                idempotency_key=f"{run_id}:malformed",
            )
    return verdict


async def terminate_children(world: World, run_id: str, how: str) -> None:
    """Terminate the children still running of a run that ended without waiting for them
    (``how``: ``terminated`` or ``failed``), and theirs in turn, as Temporal's default
    parent-close policy: nobody else would stop them, as their parent will not ask for their
    end. A child claimed but not created yet is terminated when it starts
    (``ended_with_its_parent``)."""
    try:
        children = fold(run_id, await world.list_events(run_id)).children
    except WaylineError as err:
        log.warning("run %s %s; its children were not terminated: %s", run_id, how, err)
        return
    reason = f"its parent run {run_id} was {how}"
    end = NewEvent(EventType.RUN_CANCELLED, data={"reason": reason, "terminated": True})
    for child in children.values():
        try:
            await world.append(child, [end])
        except (RunTerminalError, RunNotFoundError):
            continue  # ended meanwhile, or not created yet
        except WaylineError as err:
            log.warning("child run %s of %s not terminated: %s", child, run_id, err)
            continue
        log.info("run %s terminated: %s", child, reason, extra={"run_id": child})
        await terminate_children(world, child, "terminated")
