"""The saga unwind (seed 004): compensations in reverse order, parking and resuming."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._core import clock
from .._core.dispatch import Action, decide
from .._core.events import EventType, NewEvent
from .._core.replay import Replay
from .._core.serde import error_to_dict
from ..errors import (
    EntityConflictError,
    RunTerminalError,
)
from ..world import FLOW_TOPIC, STEP_TOPIC, Delivery
from .children import terminal
from .deferred import InlineBatch
from .messages import _Stats, _step_payload

if TYPE_CHECKING:
    from .handler import Handler

log = logging.getLogger("wayline.runtime")


async def unwind(
    h: Handler, replay: Replay, delivery: Delivery, stats: _Stats, backstop: str | None
) -> None:
    """The saga unwind (seed 004, "Compensations"): reverse every forward step that
    completed or whose outcome is unknown, latest first, each a durable step with its own
    key; a reversal that failed parks the run for a person (resume or abandon)."""
    world, run_id, my_id = h.world, replay.run_id, str(delivery.message_id)
    if replay.phase == "running":
        if replay.cancel_requested:
            unwind: dict[str, Any] = {"reason": "cancelled", "detail": replay.cancel_reason}
        else:
            failure = replay.root.exception() if replay.root is not None else None
            assert failure is not None
            unwind = {"reason": "failed", "error": error_to_dict(failure)}
        if not replay.compensation_plan() and not replay.pending_children():
            await end_unwind(h, run_id, unwind)
            return
        try:
            appended = await world.append(
                run_id, [NewEvent(EventType.RUN_COMPENSATING, data=unwind)]
            )
        except (EntityConflictError, RunTerminalError):
            await h._catch_up(replay)
            if replay.terminal is not None or replay.phase == "running":
                return
        else:
            await h._feed(replay, appended)
    while replay.terminal is None:
        running = [c for c in replay.pending_children()]
        if running and replay.phase == "compensating":
            # A child that outlived its deadline still runs: the parent waits, visibly,
            # until it settles and a person resumes or abandons the unwind (seed 004).
            try:
                appended = await world.append(
                    run_id,
                    [
                        NewEvent(
                            EventType.RUN_COMPENSATION_STUCK,
                            data={
                                "step": f"child {running[0].run_id}",
                                "stepId": running[0].cid,
                                "error": {
                                    "code": "CHILD_RUNNING",
                                    "message": f"child run {running[0].run_id} is still running",
                                },
                            },
                        )
                    ],
                )
            except (EntityConflictError, RunTerminalError):
                await h._catch_up(replay)
                continue
            await h._feed(replay, appended)
            continue
        if replay.phase == "stuck":
            if replay.abandoned:
                await end_unwind(h, run_id, replay.unwind, abandoned=True)
            return
        nxt = replay.next_compensation()
        if nxt is None:
            await end_unwind(h, run_id, replay.unwind)
            return
        forward, comp = nxt
        recovery = False
        if comp is None:
            assert forward.definition is not None and forward.definition.compensation
            cid = f"{forward.cid}.c{replay.resumes}"
            data = {
                "stepName": forward.definition.compensation.name,
                "input": forward.input,
                "occurrence": forward.occurrence,
                "compensates": forward.cid,
                "epoch": replay.resumes,
                "forwardResult": forward.result if forward.outcome == "completed" else None,
            }
            try:
                appended = await world.append(
                    run_id,
                    [
                        NewEvent(EventType.STEP_CREATED, cid, data),
                        NewEvent(
                            EventType.STEP_STARTED, cid, {"attempt": 1, "ownerMessageId": my_id}
                        ),
                    ],
                )
            except (EntityConflictError, RunTerminalError):
                await h._catch_up(replay)
                continue
            await h._feed(replay, appended)
            comp = replay.steps[cid]
            attempt = 1
        elif comp.terminal:
            error = comp.result if isinstance(comp.result, dict) else {}
            log.error(
                "run %s: compensation of step %s failed; the run waits for a person "
                "(wayline runs resume-compensation / abandon-compensation)",
                run_id,
                forward.name,
            )
            try:
                appended = await world.append(
                    run_id,
                    [
                        NewEvent(
                            EventType.RUN_COMPENSATION_STUCK,
                            data={"step": forward.name, "stepId": forward.cid, "error": error},
                        )
                    ],
                )
            except (EntityConflictError, RunTerminalError):
                await h._catch_up(replay)
                continue
            await h._feed(replay, appended)
            continue
        else:
            d = decide(
                comp.state(),
                run_id=run_id,
                correlation_id=comp.cid,
                my_message_id=my_id,
                now=clock.now(),
                lease=h.settings.lease_seconds,
                ownership_enabled=h.settings.inline_ownership,
                arriving_backstop_key=backstop,
            )
            if d.action is Action.ARM_BACKSTOP:
                stats.backstop_wakes_armed += 1
                await world.enqueue(
                    FLOW_TOPIC,
                    {"runId": run_id, "reason": "backstop", "backstopKey": d.idempotency_key},
                    idempotency_key=d.idempotency_key,
                    delay_seconds=d.delay_seconds,
                )
                return
            if d.action is Action.ENQUEUE:
                await world.enqueue(
                    STEP_TOPIC, _step_payload(run_id, comp), idempotency_key=d.idempotency_key
                )
                return
            recovery, attempt = True, comp.starts + 1
            stats.owned_recovery_steps += 1
        no_defer = InlineBatch(running=1, defer=False)  # the unwind records as it goes
        events = await h._run_inline(replay, comp, attempt, my_id, stats, recovery, no_defer)
        await h._feed(replay, events)
        if not comp.terminal:
            return  # handed off to the queue (a retry), or another owner has it


async def end_unwind(
    h: Handler, run_id: str, unwind: Mapping[str, Any], *, abandoned: bool = False
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
        if abandoned:
            error["message"] = f"{error.get('message', '')} (compensation abandoned)"
        event = NewEvent(EventType.RUN_FAILED, data={"error": error})
    await terminal(h, run_id, event)
