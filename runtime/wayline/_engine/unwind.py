"""The saga unwind (seed 004): compensations in reverse order, parking and resuming."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._core.dispatch import Action, Decision, decide
from .._core.events import EventType, NewEvent, RunStatus
from .._core.messages import Wake, WakeReason
from .._core.planning import Send, backstop_send, owner_stamp, step_send
from .._core.projections import Reversal
from .._core.replay import StepRecord
from .._core.serde import error_to_dict
from ..errors import EntityConflictError, RunTerminalError
from ..world import FLOW_TOPIC, World
from .deferred import InlineBatch
from .ending import cancel_children, fail_run, terminal
from .session import RunSession

log = logging.getLogger("wayline.runtime")

_BLOCKED_WAKE_SECONDS = 1.0
"""How long after a park refused by a block the run is delivered again (``_park``)."""


async def unwind(session: RunSession) -> None:
    """The saga unwind (seed 004, "Compensations"): reverse every forward step that
    completed or whose outcome is unknown, latest first, each a durable step with its own
    key; a reversal that failed parks the run for a person (resume or abandon)."""
    replay = session.replay
    if replay.ending.phase == "running" and not await _begin(session):
        return
    while replay.terminal is None:
        if not await _advance(session):
            return


async def fail_unwinding(session: RunSession, code: str, message: str, **fields: Any) -> bool:
    """End the run failed with ``code`` as a failure of its workflow ends: its completed steps
    reversed first (and its children waited for), when it has any; else at once. True when
    the unwind began (the handler plans again, and goes on with it), False when the run
    ended here."""
    replay = session.replay
    if replay.ending.phase != "running" or not (
        replay.compensation_plan() or replay.pending_children()
    ):
        await fail_run(session.world, session.run_id, code, message, **fields)
        return False
    error = {"name": "WaylineError", "code": code, "message": message, **fields}
    log.error(
        "run %s fails: [%s] %s; its completed steps are reversed first",
        *(session.run_id, code, message),
    )
    await session.flush()
    await _append(
        session, [NewEvent(EventType.RUN_COMPENSATING, data={"reason": "failed", "error": error})]
    )
    return True  # begun, or the log moved (caught up): the handler plans again


async def _append(session: RunSession, events: list[NewEvent]) -> bool:
    """Append and feed; False (caught up from the log) when another writer got there first."""
    try:
        appended = await session.world.append(session.run_id, events)
    except (EntityConflictError, RunTerminalError):
        await session.catch_up()
        return False
    await session.feed(appended)
    return True


async def _begin(session: RunSession) -> bool:
    """Record why the run unwinds; False when there is nothing (more) to do here."""
    replay, ending = session.replay, session.replay.ending
    if ending.cancel_requested:
        why: dict[str, Any] = {"reason": "cancelled", "detail": ending.cancel_reason}
    else:
        failure = replay.root.exception() if replay.root is not None else None
        assert failure is not None
        why = {"reason": "failed", "error": error_to_dict(failure)}
    if not replay.compensation_plan() and not replay.pending_children():
        await end_unwind(session.world, session.run_id, why)
        return False
    # attributes the workflow set after its last decision batch are recorded before the
    # unwind begins: no batch of the workflow's own comes after it
    begun = NewEvent(EventType.RUN_COMPENSATING, data=why)
    if not await _append(session, [*replay.new_attributes, begun]):
        return replay.terminal is None and ending.phase != "running"
    return True


async def _advance(session: RunSession) -> bool:
    """One step of the unwind; False when the delivery is done with it."""
    replay, ending = session.replay, session.replay.ending
    running = replay.pending_children()
    if running and ending.phase in ("compensating", "stuck") and ending.cancel_requested:
        # A cancel reaches the children still running; each one's end wakes this run (a
        # stuck unwind still waits for a person, but no longer for a child that runs on).
        why = f"its parent run {session.run_id} was cancelled: {ending.cancel_reason}"
        await cancel_children(session.world, running, why)
        if ending.phase != "stuck" or not ending.abandoned:
            return False
        # the person who abandoned the unwind does not wait for the children either: one
        # that never ends (its own unwind parked, its log fenced) held the parent for ever
    if running and ending.phase == "compensating":
        # A child that outlived its deadline still runs: the parent waits, visibly, until
        # it settles and a person resumes or abandons the unwind (seed 004).
        child = running[0]
        stuck = {
            "step": f"child {child.run_id}",
            "stepId": child.cid,
            "error": {
                "code": "CHILD_RUNNING",
                "message": f"child run {child.run_id} is still running",
            },
            "notRun": _not_run(session, None),
        }
        if await _append(session, [NewEvent(EventType.RUN_COMPENSATION_STUCK, data=stuck)]):
            return True
        return await _after_refused_park(session)
    if ending.phase == "stuck":
        if ending.abandoned:
            await end_unwind(session.world, session.run_id, ending.why, abandoned=True)
        return False
    nxt = replay.next_compensation()
    if nxt is None:
        await end_unwind(session.world, session.run_id, ending.why)
        return False
    forward, comp = nxt
    if comp is None and not forward.terminal and await _forward_running(session, forward):
        return False
    if comp is None:
        comp = await _create(session, forward)
        if comp is None:
            return True
        recovery, attempt = False, 1
    elif comp.terminal:
        return await _park(session, forward, comp)
    elif await _owned_here(session, comp):
        recovery, attempt = True, comp.starts + 1
    else:
        return False
    no_defer = InlineBatch(running=1, defer=False)  # the unwind records as it goes
    await session.feed(await session.run_inline(comp, attempt, recovery, no_defer))
    return comp.terminal  # if not: handed off to the queue (a retry), or another owner has it


async def _create(session: RunSession, forward: StepRecord) -> StepRecord | None:
    """Create the compensation of ``forward``, started (stamped) by this delivery."""
    replay = session.replay
    assert forward.definition is not None and forward.definition.compensation
    epoch = replay.ending.resumes
    cid = f"{forward.cid}.c{epoch}"
    data = {
        "stepName": forward.definition.compensation.name,
        "input": forward.input,
        "occurrence": forward.occurrence,
        "compensates": forward.cid,
        "epoch": epoch,
        "forwardResult": forward.result if forward.outcome == "completed" else None,
    }
    stamp = owner_stamp(1, session.my_id, session.settings.lease_seconds)
    created = [
        NewEvent(EventType.STEP_CREATED, cid, data),
        NewEvent(EventType.STEP_STARTED, cid, stamp),
    ]
    if not await _append(session, created):
        return None
    return replay.steps[cid]


async def _park(session: RunSession, forward: StepRecord, comp: StepRecord) -> bool:
    """A compensation failed for good: the run waits for a person. False when the run could
    not be parked: another writer parked it, or blocked it meanwhile (a worker with another
    definition set it aside). Trying again at once would loop until the block is lifted, so
    the run gets a wake a second later instead: the delivery it brings lifts the block where
    this definition serves the run, and parks it."""
    error = comp.result if isinstance(comp.result, dict) else {}
    log.error(
        "run %s: compensation of step %s failed; the run waits for a person "
        "(wayline runs resume-compensation / abandon-compensation)",
        session.run_id,
        forward.name,
    )
    stuck = {
        "step": forward.name,
        "stepId": forward.cid,
        "error": error,
        "notRun": _not_run(session, forward.cid),
    }
    if await _append(session, [NewEvent(EventType.RUN_COMPENSATION_STUCK, data=stuck)]):
        return True
    return await _after_refused_park(session)


def _not_run(session: RunSession, stuck: str | None) -> list[dict[str, str]]:
    """The reversals a park leaves untried, recorded on it: only this worker has the
    definitions that say which forward steps compensate, so a person's abandon (a client
    with no code) copies this list into its own event and shows what it gives up."""
    out = []
    for forward in session.replay.untried_compensations(stuck):
        assert forward.definition is not None and forward.definition.compensation is not None
        reversal = Reversal(forward.definition.compensation.name, forward.name, forward.cid)
        out.append(reversal.to_json())
    return out


async def _after_refused_park(session: RunSession) -> bool:
    """A park was refused. Blocked meanwhile: a wake a second later (see ``_park``); False.
    Stored ``running`` while its log unwinds (a block over the unwind lifted by a version
    that did not record what the block was put over): the unwind is declared again, which
    gives the stored status back; True, to park it now. Otherwise (parked by another
    writer): False."""
    info = await session.world.get_run(session.run_id)
    if info is None:
        return False
    if info.status is RunStatus.BLOCKED:
        key = f"{session.run_id}:unwind-blocked:{info.last_seq}"
        payload = Wake(session.run_id, WakeReason.UNWIND_BLOCKED).to_wire()
        await session.send([Send(FLOW_TOPIC, payload, key, _BLOCKED_WAKE_SECONDS)])
        return False
    ending = session.replay.ending
    if info.status is RunStatus.RUNNING and ending.phase == "compensating":
        why = dict(ending.why or {})
        return await _append(session, [NewEvent(EventType.RUN_COMPENSATING, data=why)])
    return False


def _decide(session: RunSession, step: StepRecord) -> Decision:
    settings = session.settings
    return decide(
        step.state(),
        run_id=session.run_id,
        correlation_id=step.cid,
        my_message_id=session.my_id,
        now=session.world.now(),
        lease=settings.lease_seconds,
        ownership_enabled=settings.inline_ownership,
        arriving_backstop_key=session.backstop,
    )


async def _arm_backstop(session: RunSession, d: Decision) -> None:
    session.stats.backstop_wakes_armed += 1
    await session.send([backstop_send(session.run_id, d.idempotency_key, d.delay_seconds)])


async def _forward_running(session: RunSession, forward: StepRecord) -> bool:
    """Seed 000's table holds for the unwind too: a forward body that another live delivery
    owns is still running, so it is waited for (its backstop armed; its owner unwinds once it
    has completed). Its outcome is unknown only once the owner is provably dead: the lease
    expired, or this delivery is the owner's own redelivery. A queue-owned start (a bare
    ``step_started``) has no lease but runs all the same: its step message holds it, and its
    outcome continues the run (the table's enqueue, deduplicated against that message)."""
    d = _decide(session, forward)
    if d.action is Action.ARM_BACKSTOP:
        await _arm_backstop(session, d)
        return True
    if forward.queued_start:
        await session.send([step_send(session.run_id, forward, d.idempotency_key)])
        return True
    return False


async def _owned_here(session: RunSession, comp: StepRecord) -> bool:
    """The decision table for a started compensation: True when this delivery owns it
    (owned recovery); otherwise its backstop or step message is sent and it is left."""
    d = _decide(session, comp)
    if d.action is Action.ARM_BACKSTOP:
        await _arm_backstop(session, d)
        return False
    if d.action is Action.ENQUEUE:
        await session.send([step_send(session.run_id, comp, d.idempotency_key)])
        return False
    session.stats.owned_recovery_steps += 1
    return True


async def end_unwind(
    world: World, run_id: str, unwind: Mapping[str, Any], *, abandoned: bool = False
) -> None:
    if unwind.get("reason") == "cancelled":
        event = NewEvent(
            EventType.RUN_CANCELLED,
            data={
                "reason": unwind.get("detail") or "cancelled",
                "compensationAbandoned": abandoned,
            },
        )
    else:
        error = dict(unwind.get("error") or {})
        if abandoned:  # a field of its own: the message stays the raiser's text
            error["compensationAbandoned"] = True
        event = NewEvent(EventType.RUN_FAILED, data={"error": error})
    await terminal(world, run_id, event)
