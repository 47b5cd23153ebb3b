"""Taking a token of a rate limit (``wayline.RateLimit``) before a step's body or a run starts.

A step with ``rate_limit=`` never runs inline (``StepDefinition.queued_only``): its queued
delivery takes a token of its key before the attempt's ``step_started``. With none, no attempt
starts (no retry is spent) and the delivery is handed back (:meth:`World.release`: no delivery
is counted) until the token the bucket reserved for it is due, so that the steps waiting on
one key come back one at a time, each when its own token falls due. The run shows it:
``blocked`` with ``waitingFor: rate_limit``, the key and when the step's token is due, lifted
by that step when it takes it. Nothing else is written, so a replay never meets the wait.

A workflow with ``rate_limit=`` takes a token before its run's first ``run_started`` (after its
concurrency slot, so a run that waits for both never spends a token it cannot use); a run that
finds none is ``blocked`` likewise and a flow message comes back when its token is due.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._core.definitions import StepDefinition, WorkflowDefinition
from .._core.events import EventType, NewEvent, RunStatus
from .._core.projections import StepView
from .._core.rate_limits import RateLimit
from .._core.replay import Replay
from ..errors import EntityConflictError, RunTerminalError
from ..world import FLOW_TOPIC, Delivery, RunInfo, World
from ..world.sending import send
from .concurrency import run_key
from .step_runner import Failed
from .step_slots import mark, show_taken, step_key

log = logging.getLogger("wayline.runtime")

STEP_CODE = "STEP_RATE_LIMIT"
RUN_CODE = "RATE_LIMIT"
_LATE = 0.005
"""Seconds a hand-back outlasts the wait, so that the delivery comes back once its reserved
token is due rather than a moment before (which costs one more read and hand-back)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """No token: the step (or run) waits until ``until`` (the world's time) at the earliest."""

    key: str
    rate: str
    seconds: float
    until: float

    @property
    def delay(self) -> float:
        """Seconds to hand the delivery back for: until its reserved token is due."""
        return self.seconds + _LATE

    @property
    def until_text(self) -> str:
        return datetime.fromtimestamp(self.until, UTC).isoformat(timespec="milliseconds")


async def take(world: World, key: str, limit: RateLimit, holder: str) -> Wait | None:
    """A token of ``key`` taken for ``holder`` (None), or how long until the one reserved for
    it is due."""
    seconds = await world.take_token(key, limit.per_second, limit.capacity, holder)
    if seconds <= 0.0:
        return None
    return Wait(key, limit.rate, seconds, world.now() + seconds)


async def take_for_step(
    world: World, run_id: str, step: StepView, definition: StepDefinition[..., Any]
) -> Wait | Failed | None:
    """A token for the step's body (None), a :class:`Wait`, or the step's failure when its
    key function raised."""
    limit = definition.rate_limit
    assert limit is not None
    key = step_key(step, definition, limit, "rate_limit")
    if isinstance(key, Failed):
        return key
    return await take(world, key, limit, f"{run_id}:{step.cid}")


def step_waiting(info: RunInfo) -> bool:
    """The run is blocked by a step waiting for a token (only that step lifts it)."""
    return info.status is RunStatus.BLOCKED and (info.error or {}).get("code") == STEP_CODE


async def show_step_waiting(world: World, info: RunInfo, step: StepView, wait: Wait) -> None:
    """Mark the run ``blocked`` with ``waitingFor: rate_limit`` naming the step and when its
    token is due, when it is simply running, or shows this step's rate wait with an earlier
    due time (its reservation lapsed and it has a new one: the new time is shown)."""
    message = (
        f"step {step.name!r} ({step.cid}) is waiting for rate limit {wait.key!r} "
        f"({wait.rate}): its token is due at {wait.until_text}"
    )
    data = {
        "code": STEP_CODE,
        "message": message,
        "waitingFor": "rate_limit",
        "limit": wait.key,
        "rate": wait.rate,
        "until": wait.until_text,
        "step": step.name,
        "stepId": step.cid,
    }

    def block(now: RunInfo) -> NewEvent | None:
        shown = now.error or {}
        if now.status is RunStatus.BLOCKED and step_waiting(now):
            if shown.get("stepId") != step.cid or str(shown.get("until", "")) >= wait.until_text:
                return None  # another step's wait is shown, or this one's is still ahead
        elif now.status is not RunStatus.RUNNING:
            return None
        log.info("run %s: %s", now.run_id, message)
        return NewEvent(EventType.RUN_BLOCKED, data=data)

    await mark(world, info, block)


async def show_step_taken(world: World, info: RunInfo, step: StepView) -> None:
    """Lift the run's block if it named this step's rate wait."""
    await show_taken(world, info, step, STEP_CODE)


async def admit(
    world: World,
    info: RunInfo,
    workflow: WorkflowDefinition[..., Any],
    replay: Replay,
    delivery: Delivery,
) -> bool:
    """True when the run may start now (it took a token, or its workflow has no rate limit).
    False: it waits (blocked, ``waitingFor: rate_limit``) and a flow message comes back when
    the token reserved for it is due; the caller acks this one."""
    limit = workflow.rate_limit
    if limit is None or replay.ending.cancel_requested:
        return True  # a run cancelled while waiting ends without spending a token
    run_id = replay.run_id
    key = await run_key(world, workflow, replay, limit, "rate_limit")
    if key is None:
        return False
    wait = await take(world, key, limit, run_id)
    if wait is None:
        return True
    message = (
        f"waiting for rate limit {key!r} ({limit.rate}): its token is due at {wait.until_text}"
    )
    shown = info.error or {}
    if (
        info.status is not RunStatus.BLOCKED
        or shown.get("code") != RUN_CODE
        or str(shown.get("until", "")) < wait.until_text  # came back and found none again
    ):
        log.info("run %s %s", run_id, message)
        data = {
            "code": RUN_CODE,
            "message": message,
            "waitingFor": "rate_limit",
            "limit": key,
            "rate": limit.rate,
            "until": wait.until_text,
        }
        try:
            await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=data)])
        except (RunTerminalError, EntityConflictError):
            return False
    await send(
        world,
        FLOW_TOPIC,
        {"runId": run_id, "reason": "rate_limit"},
        # a successor key: this delivery's own key is still held while it is in flight
        idempotency_key=f"{run_id}:rate_limit:after:{delivery.message_id}",
        delay_seconds=wait.delay,
    )
    return False
