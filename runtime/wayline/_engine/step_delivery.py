"""A queued step delivery: one step body, then the run continues under the same message."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pydantic

from .._core import clock
from .._core.definitions import StepDefinition, find_step
from .._core.dispatch import step_dispatch_key
from .._core.events import EventType, NewEvent
from .._core.forks import key_run_id
from .._core.projections import RunCancelRequested, RunView, StepView, fold
from ..errors import EntityConflictError, RunTerminalError, SequenceConflictError, WaylineError
from ..settings import Settings
from ..world import Delivery, RunInfo, World
from . import fencing, rate_waits, step_slots
from .ending import malformed, record_outcome
from .messages import ACK, StepMessage, Verdict, unseen
from .step_runner import Failed, Outcome, Retry, run_step_body

log = logging.getLogger("wayline.runtime")
_START_TRIES = 20


@dataclass(frozen=True, slots=True)
class Continue:
    """The step settled (or was never this delivery's to run): continue the run's flow under
    this same message (never orphaned, seed 000)."""

    run_id: str


async def handle_step(world: World, settings: Settings, delivery: Delivery) -> Verdict | Continue:
    try:
        msg = StepMessage.model_validate(delivery.payload)
    except pydantic.ValidationError as err:
        return await malformed(world, delivery, err)
    run_id, cid = msg.runId, msg.stepId
    info, events = await world.read_run(run_id)  # one read of the run and its log
    if info is None:
        return unseen(delivery, f"step message for unknown run {run_id}")
    if info.status.terminal:
        return ACK
    view = fold(run_id, events)
    step = view.steps.get(cid)
    if step is None:
        return unseen(delivery, f"step message for {run_id}/{cid}, never created")
    if step.terminal:
        return Continue(run_id)
    if _unwinding(view) and not _may_start(step):
        log.info("step %s of run %s not started: the run is being compensated", cid, run_id)
        # a step that ran before (a retry was due) may be what the unwind waits for: it goes
        # on; one that never started is skipped by the unwind, nothing waits for it
        return Continue(run_id) if step.starts > 0 else ACK
    if _held(view, step):
        log.info("step %s of run %s not started: the run is paused", cid, run_id)
        return ACK  # the unpause's wake sends the step again
    definition = find_step(step.name)
    if definition is None and delivery.attempt <= settings.max_queue_deliveries:
        # Another worker (another app sharing this world) may have it: retry later rather
        # than fail a step this worker merely does not know.
        log.warning(
            "step %r of run %s is not registered in this worker (is its module imported?); "
            "retrying later",
            step.name,
            run_id,
        )
        return Verdict("retry", delay=min(30.0, 2.0 * delivery.attempt))
    outcome = _refused(step, definition, delivery.attempt)
    if outcome is None:
        assert definition is not None
        seq = events[-1].seq if events else info.last_seq
        ran = await _run(world, delivery, info, step, definition, seq, view)
        if isinstance(ran, step_slots.Wait):
            await step_slots.show_waiting(world, info, step, ran)
            await world.release(delivery, step_slots.pause())  # no attempt, no delivery spent
            return Verdict("none")
        if isinstance(ran, rate_waits.Wait):
            await rate_waits.show_step_waiting(world, info, step, ran)
            await world.release(delivery, ran.delay)  # no attempt, no delivery spent
            return Verdict("none")
        if isinstance(ran, Verdict | Continue):
            return ran
        outcome = ran
    await record_outcome(world, run_id, cid, outcome, step.name)
    if isinstance(outcome, Retry) and not await _unwound_meanwhile(world, run_id, step):
        await _hand_back_retry(world, delivery, run_id, step, outcome.retry_after)
        return Verdict("none")
    return Continue(run_id)


def _unwinding(view: RunView) -> bool:
    """The log says the run is being compensated (its stored status may say ``blocked`` or
    ``running`` meanwhile: a block during an unwind, lifted, does not end the unwind), or asked
    to stop: a cancel request always leads to the unwind, which skips a forward step that never
    started, so none starts once the request is recorded."""
    return view.status in ("compensating", "compensation_stuck") or any(
        isinstance(p, RunCancelRequested) for _, p in view.phases
    )


async def _unwound_meanwhile(world: World, run_id: str, step: StepView) -> bool:
    """The run began to unwind (or ended) while this forward attempt ran: its retry would not
    start, and the unwind waits for the step to settle, so the run is continued now. A read
    that fails answers False: the retry is kept, with its delay."""
    if step.compensates is not None:
        return False
    try:
        info, events = await world.read_run(run_id)
    except WaylineError:
        return False
    return info is None or info.status.terminal or _unwinding(fold(run_id, events))


async def _run(
    world: World,
    delivery: Delivery,
    info: RunInfo,
    step: StepView,
    definition: StepDefinition[..., object],
    seq: int,
    view: RunView,
) -> Outcome | Verdict | Continue | step_slots.Wait | rate_waits.Wait:
    """Run the body once in this process (single flight), under a bare (queue-owned) start,
    holding a slot of the step's concurrency limit when it has one, and with a token of its
    rate limit when it has one (taken while the slot is held, so a step that waits for both
    spends no token it cannot use)."""
    run_id = info.run_id
    attempt, started = step.spent + 1, True

    async def start_and_run() -> Outcome | None:
        nonlocal started
        try:  # a bare start: queue-owned, clears any inline ownership
            started = await _start(world, run_id, step, attempt, seq, view)
        except (EntityConflictError, RunTerminalError):
            started = False
        if not started:
            return None
        return await run_step_body(
            definition,
            run_id=run_id,
            step_id=step.cid,
            stored_input=step.input,
            attempt=attempt,
            occurrence=step.occurrence,
            forward_result=step.forward_result,
            world=world,
            key_run=key_run_id(run_id, info.attributes),
        )

    async def with_token() -> Outcome | rate_waits.Wait | None:
        if definition.rate_limit is None:
            return await start_and_run()
        token = await rate_waits.take_for_step(world, run_id, step, definition)
        if token is not None:
            return token  # waiting, or the key function failed (the step fails unstarted)
        await rate_waits.show_step_taken(world, info, step)
        return await start_and_run()

    async def body() -> Outcome | step_slots.Wait | rate_waits.Wait | None:
        if definition.concurrency is None:
            return await with_token()
        slot = await step_slots.take(world, run_id, step, definition)
        if not isinstance(slot, step_slots.Slot):
            return slot  # waiting, or the key function failed (the step fails unstarted)
        async with slot.held():
            await step_slots.show_taken(world, info, step)
            return await with_token()

    key = step_dispatch_key(run_id, step.cid)
    executed, outcome = await world.single_flight.run(key, body, fencing.running_loop())
    if isinstance(outcome, step_slots.Wait | rate_waits.Wait):
        return outcome
    if executed and (not started or outcome is None):
        return Continue(run_id)
    if not executed:
        # The loser waited for the winner to settle. If the winner handed off a retry, its
        # enqueue under this step's key was deduped against *this* in-flight message: acking
        # it would leave the step with no message. So this message becomes the retry,
        # redelivered when it is due.
        after = fold(run_id, await world.list_events(run_id)).steps.get(step.cid)
        if after is not None and not after.terminal:
            await _hand_back_retry(world, delivery, run_id, step, after.retry_after or 0.0)
            return Verdict("none")
        return Continue(run_id)
    assert outcome is not None
    return outcome


async def _hand_back_retry(
    world: World, delivery: Delivery, run_id: str, step: StepView, due: float
) -> None:
    """Hand the delivery back to come again when the step's retry is due. A world that
    refuses it (the delivery is no longer provably this worker's: on NATS, one received
    before a lost connection, whose server may have redelivered it already) leaves the
    message to come back when its visibility runs out: handing it back then could release
    another holder's delivery while its body runs (docs/ownership.md). That wait is said,
    since the retry's own log line gave it as due sooner."""
    delay = max(0.0, due - clock.now())
    if await world.retry(delivery, delay):
        return
    log.warning(
        "run %s step %s (%s): its retry, due in %.1fs, waits for its delivery to come back "
        "(at most %.0fs, the visibility): the delivery is no longer provably this worker's "
        "and could not be handed back",
        run_id,
        step.name,
        step.cid,
        delay,
        world.visibility_seconds,
        extra={"run_id": run_id, "step": step.name, "step_id": step.cid},
    )


def _held(view: RunView, step: StepView) -> bool:
    """The run is paused and ``step`` is a forward step: no attempt of it starts. A
    compensation does: no unwind begins over a pause (the world refuses its
    ``run_compensating``, and a cancel lifts the pause in its own write), so a paused run
    being unwound has a log an older version wrote, whose stored status is ``compensating``
    and which no unpause could lift."""
    return view.status == "paused" and step.compensates is None


def _may_start(step: StepView) -> bool:
    """Once a run is being compensated no forward body starts: the unwind has compensated
    (or will) a forward step that is not running. A compensation starts, and a forward step
    already started runs on (the unwind waits for its outcome)."""
    return step.compensates is not None or step.status == "running"


async def _start(
    world: World, run_id: str, step: StepView, attempt: int, seq: int, view: RunView
) -> bool:
    """Append the bare start fenced on the log as read (``seq``, folded into ``view``), so
    that an unwind that began since is seen before a forward body starts. False: the run is
    now being compensated (or has ended) and this step must not start.

    The starts of one run's steps in this process take turns (a wide ``gather`` queues them
    all at once: each refused the others' appends, and each refusal read and folded the whole
    log again); a refused one folds only what was appended since it read."""
    start = NewEvent(EventType.STEP_STARTED, step.cid, {"attempt": attempt})
    # as the step was read: folding later events moves ``step`` (it is ``view``'s), and a
    # start by another delivery meanwhile must not let this one start after a cancel
    may_start = _may_start(step)
    async with world.single_flight.turn(f"{run_id}:start"):
        for _ in range(_START_TRIES):
            try:
                await world.append(run_id, [start], expected_seq=seq)
                return True
            except SequenceConflictError:
                since = await world.list_events(run_id, after_seq=seq)
                if since and since[0].seq == seq + 1:
                    for event in since:
                        view.apply(event)
                    seq = since[-1].seq
                else:  # not the log as read (removed behind our back): read it whole
                    info, events = await world.read_run(run_id)
                    if info is None or info.status.terminal:
                        return False
                    view, seq = fold(run_id, events), info.last_seq
                if view.ended_at is not None:
                    return False
                if _held(view, step):
                    log.info("step %s of run %s not started: the run is paused", step.cid, run_id)
                    return False
                if _unwinding(view) and not may_start:
                    log.info(
                        "step %s of run %s not started: the run is being compensated",
                        step.cid,
                        run_id,
                    )
                    return False
    # a busy log: this delivery is tried again later (a start is never appended unfenced:
    # an unwind may have begun meanwhile)
    raise SequenceConflictError(
        f"step {step.cid} of run {run_id} not started: the log moved {_START_TRIES} times"
    )


def _refused(
    step: StepView, definition: StepDefinition[..., object] | None, deliveries: int
) -> Outcome | None:
    """The step's outcome without running it: unknown to every worker that received it, or
    out of attempts. None: run it."""
    if definition is None:
        return Failed(
            {
                "name": "FatalError",
                "code": "STEP_NOT_FOUND",
                "message": f"step {step.name!r} is not registered in any worker that "
                f"received it ({deliveries} deliveries)",
            }
        )
    attempt = step.spent + 1
    if attempt > definition.max_retries + 1:
        return Failed(
            {
                "name": "FatalError",
                "code": "MAX_ATTEMPTS_EXCEEDED",
                "message": f"step {step.name!r} exceeded {attempt - 1} attempts",
            }
        )
    return None
