"""A queued step delivery: one step body, then the run continues under the same message."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic

from .._core import clock
from .._core.events import Event, EventType, NewEvent
from .._sdk.definitions import find_step
from ..errors import (
    EntityConflictError,
    RunTerminalError,
)
from ..world import FLOW_TOPIC, Delivery
from .messages import ACK, StepMessage, Verdict
from .step_runner import Failed, Outcome, Retry, run_step_body

if TYPE_CHECKING:
    from .handler import Handler

log = logging.getLogger("wayline.runtime")


async def handle_step(h: Handler, delivery: Delivery) -> Verdict:
    try:
        msg = StepMessage.model_validate(delivery.payload)
    except pydantic.ValidationError as err:
        return await h.malformed(delivery, err)
    world, run_id, cid = h.world, msg.runId, msg.stepId
    info = await world.get_run(run_id)
    if info is None:
        return Verdict("dead", reason=f"step message for unknown run {run_id}")
    if info.status.terminal:
        return ACK
    step = _fold_step(await world.list_events(run_id), cid)
    if step is None:
        return Verdict("dead", reason=f"step message for {run_id}/{cid}, never created")
    if not step.terminal:
        definition = find_step(step.name)
        attempt = step.starts + 1
        outcome: Outcome | None
        if definition is None:
            if delivery.attempt <= h.settings.max_queue_deliveries:
                # Another worker (another app sharing this world) may have it: retry
                # later rather than fail a step this worker merely does not know.
                log.warning(
                    "step %r of run %s is not registered in this worker (is its "
                    "module imported?); retrying later",
                    step.name,
                    run_id,
                )
                return Verdict("retry", delay=min(30.0, 2.0 * delivery.attempt))
            outcome = Failed(
                {
                    "name": "FatalError",
                    "code": "STEP_NOT_FOUND",
                    "message": f"step {step.name!r} is not registered in any worker that "
                    f"received it ({delivery.attempt} deliveries)",
                }
            )
        elif attempt > definition.max_retries + 1:
            outcome = Failed(
                {
                    "name": "FatalError",
                    "code": "MAX_ATTEMPTS_EXCEEDED",
                    "message": f"step {step.name!r} exceeded {attempt - 1} attempts",
                }
            )
        else:
            outcome = None
        if outcome is None and definition is not None:
            started = True

            async def body() -> Outcome | None:
                nonlocal started
                assert definition is not None
                try:  # a bare start: queue-owned, clears any inline ownership
                    await world.append(
                        run_id, [NewEvent(EventType.STEP_STARTED, cid, {"attempt": attempt})]
                    )
                except (EntityConflictError, RunTerminalError):
                    started = False
                    return None
                return await run_step_body(
                    definition,
                    run_id=run_id,
                    step_id=cid,
                    stored_input=step.input,
                    attempt=attempt,
                    occurrence=step.occurrence,
                    forward_result=step.forward_result,
                    world=world,
                )

            executed, outcome = await world.single_flight.run(f"{run_id}:{cid}", body)
            if executed and not started:
                return await continue_run(h, run_id, delivery)
            if not executed:
                # The loser waited for the winner to settle. If the winner handed off a
                # retry, its enqueue under this step's key was deduped against *this*
                # in-flight message: acking it would leave the step with no message. So
                # this message becomes the retry, redelivered when it is due.
                after = _fold_step(await world.list_events(run_id), cid)
                if after is not None and not after.terminal:
                    delay = max(0.0, (after.retry_after or 0.0) - clock.now())
                    await world.retry(delivery, delay)
                    return Verdict("none")
                outcome = None
        if outcome is not None:
            await h._record(run_id, cid, outcome, step.name)
            if isinstance(outcome, Retry):
                await world.retry(delivery, max(0.0, outcome.retry_after - clock.now()))
                return Verdict("none")
    return await continue_run(h, run_id, delivery)


async def continue_run(h: Handler, run_id: str, delivery: Delivery) -> Verdict:
    """After a step settles, continue the run under this same message."""
    info = await h.world.get_run(run_id)
    if info is None or info.status.terminal:
        return ACK
    if info.workflow not in h.workflows:
        await h.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "step"})
        return ACK
    return await h._flow(run_id, delivery)


@dataclass(slots=True)
class _StepView:
    name: str
    input: Any
    occurrence: int
    starts: int = 0
    terminal: bool = False
    retry_after: float | None = None
    forward_result: Any = None


def _fold_step(events: list[Event], cid: str) -> _StepView | None:
    view: _StepView | None = None
    for e in events:
        if e.correlation_id != cid:
            continue
        if e.type is EventType.STEP_CREATED:
            view = _StepView(
                str(e.data.get("stepName")), e.data.get("input"), int(e.data.get("occurrence") or 0)
            )
            view.forward_result = e.data.get("forwardResult")
        elif view is not None:
            if e.type is EventType.STEP_STARTED:
                view.starts += 1
            elif e.type is EventType.STEP_RETRYING:
                retry_after = e.data.get("retryAfter")
                view.retry_after = (
                    float(retry_after) if isinstance(retry_after, int | float) else None
                )
            elif e.type in (EventType.STEP_COMPLETED, EventType.STEP_FAILED):
                view.terminal = True
    return view
