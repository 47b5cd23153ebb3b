"""The saga unwind (seed 004): compensations in reverse order, parking and resuming.

What the unwind does next is decided by the pure planner (``planning.unwind_move``), one move
a turn of the handler's drive loop; :func:`carry_out` carries out that one move here and says
whether the loop plans again. A failure the world found in a decision batch is planned too
(``planning.fail_move``), and its move, ending the run at once or beginning the unwind, is
carried out here the same way."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._core.events import EventType, NewEvent, RunStatus
from .._core.messages import Wake, WakeReason
from .._core.planning import (
    BeginFailedUnwind,
    BeginUnwind,
    CancelChildren,
    EndUnwind,
    FailNow,
    Park,
    RunCompensation,
    Send,
    UnwindMove,
    WaitElsewhere,
    WaitForPerson,
)
from .._core.replay import StepRecord
from ..errors import EntityConflictError, RunTerminalError
from ..world import FLOW_TOPIC, World
from .deferred import InlineBatch
from .ending import cancel_children, end_with, terminal
from .session import RunSession

log = logging.getLogger("wayline.runtime")

_BLOCKED_WAKE_SECONDS = 1.0
"""How long after a park refused by a block the run is delivered again (``_park``)."""


async def carry_out(session: RunSession, move: UnwindMove | FailNow | BeginFailedUnwind) -> bool:
    """Carry out one move of the saga unwind, or what a failure the world found does to the
    run (``planning.fail_move``); True when the handler plans again, False when the delivery
    is done with the run (it ended, waits for a person, a child or another owner)."""
    match move:
        case FailNow(failure, events):
            log.error("run %s failed: [%s] %s", session.run_id, failure.code, failure.message)
            await end_with(session.world, session.run_id, events, session.replay)
            return False
        case BeginFailedUnwind(failure, events):
            log.error(
                "run %s fails: [%s] %s; its completed steps are reversed first",
                *(session.run_id, failure.code, failure.message),
            )
            await session.flush()
            # the attributes the workflow set in the refused batch come first (the move's
            # events): no batch of the workflow's own comes after the unwind begins
            await _append(session, events)
            return True  # begun, or the log moved (caught up): the handler plans again
        case BeginUnwind(events):
            if await _append(session, events):
                return True
            ending = session.replay.ending
            return session.replay.terminal is None and ending.phase != "running"
        case EndUnwind(why, abandoned):
            await end_unwind(session.world, session.run_id, why, abandoned=abandoned)
            return False
        case CancelChildren(children, why, then):
            await cancel_children(session.world, children, why)
            if then is not None:
                await end_unwind(session.world, session.run_id, then.why, abandoned=then.abandoned)
            return False
        case Park(stuck, failed):
            return await _park(session, stuck, failed)
        case RunCompensation():
            return await _run(session, move)
        case WaitElsewhere(send, backstop):
            if backstop:
                session.stats.backstop_wakes_armed += 1
            await session.send([send])
            return False
        case WaitForPerson():
            return False


async def _append(session: RunSession, events: list[NewEvent]) -> bool:
    """Append and feed; False (caught up from the log) when another writer got there first."""
    try:
        appended = await session.world.append(session.run_id, events)
    except (EntityConflictError, RunTerminalError):
        await session.catch_up()
        return False
    await session.feed(appended)
    return True


async def _run(session: RunSession, move: RunCompensation) -> bool:
    """Run one reversal here (created and stamped first when new); True when it ended, else
    it was handed off to the queue (a retry), or another writer got there first."""
    if move.events and not await _append(session, move.events):
        return True  # created by another writer: plan again from what the log says
    if move.recovery:
        session.stats.owned_recovery_steps += 1
    comp = session.replay.steps[move.cid]
    no_defer = InlineBatch(running=1, defer=False)  # the unwind records as it goes
    await session.feed(await session.run_inline(comp, move.attempt, move.recovery, no_defer))
    return comp.terminal


async def _park(session: RunSession, stuck: dict[str, Any], failed: StepRecord | None) -> bool:
    """The run waits for a person. False when the run could not be parked: another writer
    parked it, or blocked it meanwhile (a worker with another definition set it aside).
    Trying again at once would loop until the block is lifted, so the run gets a wake a
    second later instead: the delivery it brings lifts the block where this definition
    serves the run, and parks it."""
    if failed is not None:
        log.error(
            "run %s: compensation of step %s failed; the run waits for a person "
            "(wayline runs resume-compensation / abandon-compensation)",
            session.run_id,
            failed.name,
        )
    if await _append(session, [NewEvent(EventType.RUN_COMPENSATION_STUCK, data=stuck)]):
        return True
    return await _after_refused_park(session)


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
