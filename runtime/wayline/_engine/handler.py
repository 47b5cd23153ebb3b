"""What a worker does with one delivery (DESIGN "One delivery, step by step").

A flow delivery checks the delivery budget, replays the run, writes the suspension's new hooks,
waits and steps, applies the dispatch decision table to every created, non-terminal step, runs
the inline batch (lazy new steps and owned recovery) and continues the *same* in-memory replay
with their results, until the run suspends with nothing left to run here or ends. A step
delivery runs one queued step body, then continues into the flow loop under its own message,
so owned recovery is never orphaned by an early return (seed 000, second invariant).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping
from typing import Any

import pydantic
from opentelemetry import trace

from .._core import clock
from .._core.dispatch import Action, decide, step_dispatch_key
from .._core.events import Event, EventType, NewEvent, RunStatus
from .._core.ids import new_run_id
from .._core.replay import Replay, StepRecord
from .._core.serde import encode, error_to_dict
from .._sdk.definitions import WorkflowDefinition
from ..errors import (
    EntityConflictError,
    EntityMissingError,
    HookTokenConflictError,
    ReplayDivergenceError,
    RunTerminalError,
    SerializationError,
)
from ..settings import Settings
from ..world import FLOW_TOPIC, STEP_TOPIC, Delivery, RunInfo, World
from .children import start_child, sync_children, terminal
from .concurrency import admit
from .deferred import InlineBatch, Rebuild, append_batch, flush, outcome_event
from .hook_events import disposals, hook_created_data
from .messages import ACK, FlowMessage, Verdict, _malformed, _Stats, _step_payload
from .step_delivery import handle_step
from .step_runner import Failed, Outcome, Retry, run_step_body
from .unwind import unwind

log = logging.getLogger("wayline.runtime")
tracer = trace.get_tracer("wayline")


class Handler:
    def __init__(
        self, world: World, workflows: Mapping[str, WorkflowDefinition], settings: Settings
    ) -> None:
        self.world = world
        self.workflows = dict(workflows)
        self.settings = settings
        self.closing = False
        """Set by ``Worker.close``: reach the next checkpoint, start nothing new."""
        self.protected: set[asyncio.Task[Any]] = set()
        """Tasks running a compensation body: a forced close lets them checkpoint."""

    # --- flow deliveries -----------------------------------------------------------------------
    async def handle_flow(self, delivery: Delivery) -> Verdict:
        try:
            msg = FlowMessage.model_validate(delivery.payload)
        except pydantic.ValidationError as err:
            return await self.malformed(delivery, err)
        return await self._flow(msg.runId, delivery, msg.backstopKey)

    async def _flow(self, run_id: str, delivery: Delivery, backstop: str | None = None) -> Verdict:
        world = self.world
        info = await world.get_run(run_id)
        if info is None:
            return Verdict("dead", reason=f"flow message for unknown run {run_id}")
        if info.status.terminal:
            return ACK
        workflow = self.workflows.get(info.workflow)
        if workflow is None:
            log.warning(
                "run %s needs workflow %r, which this worker does not have; retrying "
                "later for a worker that does",
                run_id,
                info.workflow,
            )
            return Verdict("retry", delay=5.0)
        if delivery.topic == FLOW_TOPIC and delivery.attempt > self.settings.max_queue_deliveries:
            await self._fail(
                run_id,
                "MAX_DELIVERIES_EXCEEDED",
                f"flow delivery attempt {delivery.attempt} exceeds "
                f"WORKFLOW_MAX_QUEUE_DELIVERIES={self.settings.max_queue_deliveries}",
            )
            return ACK
        why = workflow.mismatch(info.attributes.get("definition"))
        if why is not None:
            return await self._block(info, why)
        if info.status is RunStatus.BLOCKED and info.started_at is not None:
            try:
                await world.append(run_id, [NewEvent(EventType.RUN_UNBLOCKED)])
            except EntityConflictError:
                pass
            except RunTerminalError:
                return ACK
        # A run started by name (no definition recorded) is pinned to this worker's definition
        # by its run_started: from then on, only a matching worker drives it.
        pin = None if isinstance(info.attributes.get("definition"), dict) else workflow
        stats = _Stats()
        with tracer.start_as_current_span(
            "workflow.execute",
            attributes={
                "workflow.name": workflow.name,
                "workflow.run.id": run_id,
                "messaging.message.id": str(delivery.message_id),
            },
        ) as span:
            defer = True
            try:
                while True:
                    replay = Replay(workflow, run_id)
                    replay.parent = info.attributes.get("parent")
                    replay.delivery_attempt = delivery.attempt
                    events = await world.list_events(run_id)
                    if pin is not None and _pinned_elsewhere(pin, events):
                        return Verdict("retry", delay=0.0)  # check the new pin again
                    replay.feed(events)
                    await sync_children(self, replay)
                    if (
                        replay.root is None
                        and replay.terminal is None
                        and not await admit(self, info, workflow, replay, delivery)
                    ):
                        return ACK  # waiting for a concurrency slot (see ``concurrency``)
                    try:
                        if replay.root is None and replay.terminal is None:
                            await self._start(replay, defer, pin)
                        driven = await self._drive(replay, delivery, stats, backstop, defer)
                    except Rebuild:
                        stats.rebuilds += 1
                        defer = defer and not replay.needs_stamp
                        log.debug(
                            "run %s: replay rebuilt from the log (%s)",
                            run_id,
                            "it read time during a provisional event"
                            if replay.needs_stamp
                            else "the log moved under a provisional event",
                        )
                        continue
                    if replay.provisional:
                        log.error(
                            "invariant violated: delivery %s returns with run %s's %s unwritten",
                            delivery.message_id,
                            run_id,
                            [str(e.type) for e in replay.provisional],
                        )
                    if not driven:
                        return Verdict("retry", delay=0.0)  # closing: hand the run back
                    break
            except ReplayDivergenceError as err:
                await self._fail(run_id, err.code, err.message)
            finally:
                if stats.inflight_owned:
                    log.error(
                        "invariant violated: delivery %s returns while owned steps %s are "
                        "still running (seed 000: no path acks the owning message while an "
                        "owned step is non-terminal)",
                        delivery.message_id,
                        stats.inflight_owned,
                    )
                span.set_attribute(
                    "workflow.inline_ownership.owned_recovery_steps", stats.owned_recovery_steps
                )
                span.set_attribute(
                    "workflow.inline_ownership.backstop_wakes_armed", stats.backstop_wakes_armed
                )
                span.set_attribute("workflow.steps.inline", stats.inline_steps)
                span.set_attribute("workflow.replay.rebuilds", stats.rebuilds)
        return ACK

    async def _drive(
        self,
        replay: Replay,
        delivery: Delivery,
        stats: _Stats,
        backstop: str | None,
        defer: bool = True,
    ) -> bool:
        """Returns False when the worker is closing and the run was handed back unfinished
        (its message is then redelivered, to this worker's replacement or another). With
        ``defer``, the last completion of an inline batch rides on the next write (see
        ``deferred``); raises :class:`Rebuild` when the replay must be built again."""
        world, settings, run_id = self.world, self.settings, replay.run_id
        my_id = str(delivery.message_id)
        armed: set[str] = set()
        while True:
            if replay.terminal is not None:
                return True
            if self.closing:
                await flush(world, replay)
                return False
            if replay.phase != "running" or replay.cancel_requested:
                await flush(world, replay)
                await unwind(self, replay, delivery, stats, backstop)
                return True
            if replay.finished:
                root = replay.root
                if (
                    root is not None
                    and root.failed()
                    and (replay.compensation_plan() or replay.pending_children())
                ):
                    await flush(world, replay)
                    await unwind(self, replay, delivery, stats, backstop)
                else:
                    await self._finish(replay)  # carries a provisional completion
                return True
            now = clock.now()
            due = [w for w in replay.pending_waits() if w.resume_at <= now]
            if due:
                await flush(world, replay)
                completions = [
                    NewEvent(EventType.WAIT_COMPLETED, w.cid, {"resumeAt": w.resume_at})
                    for w in due
                ]
                if not await self._append_inputs(replay, completions):
                    return True
                continue

            if replay.new_disposals:  # before new hooks, which may take the freed tokens
                await flush(world, replay)
                if not await self._append_inputs(replay, disposals(replay)):
                    return True
                continue

            # 1. The suspension's new hooks, waits and steps: one atomic decision batch.
            batch: list[NewEvent] = []
            lazy: list[StepRecord] = []
            sends: list[tuple[str, dict[str, Any], str, float]] = []
            for hook in list(replay.new_hooks.values()):
                batch.append(NewEvent(EventType.HOOK_CREATED, hook.cid, hook_created_data(hook)))
                if hook.timeout is not None:
                    batch.append(
                        NewEvent(
                            EventType.WAIT_CREATED,
                            hook.timeout.cid,
                            {"resumeAt": hook.timeout.resume_at},
                        )
                    )
            children = list(replay.new_children.values())
            for child in children:
                child.run_id = new_run_id()
                data: dict[str, Any] = {"childRunId": child.run_id, "workflow": child.workflow.name}
                if child.deadline is not None:
                    data["deadline"] = child.deadline.resume_at
                batch.append(NewEvent(EventType.CHILD_CREATED, child.cid, data))
                if child.deadline is not None:
                    batch.append(
                        NewEvent(
                            EventType.WAIT_CREATED,
                            child.deadline.cid,
                            {"resumeAt": child.deadline.resume_at},
                        )
                    )
            for wait in list(replay.new_waits.values()):
                batch.append(
                    NewEvent(EventType.WAIT_CREATED, wait.cid, {"resumeAt": wait.resume_at})
                )
            slots = settings.max_inline_steps
            for rec in list(replay.new_steps.values()):
                batch.append(
                    NewEvent(
                        EventType.STEP_CREATED,
                        rec.cid,
                        {"stepName": rec.name, "input": rec.input, "occurrence": rec.occurrence},
                    )
                )
                if slots > 0:  # lazy inline: created and started (stamped) in one write
                    slots -= 1
                    batch.append(
                        NewEvent(
                            EventType.STEP_STARTED, rec.cid, {"attempt": 1, "ownerMessageId": my_id}
                        )
                    )
                    lazy.append(rec)
                else:  # eager: created, then queued as its own step message
                    key = step_dispatch_key(run_id, rec.cid)
                    armed.add(key)
                    sends.append((STEP_TOPIC, _step_payload(run_id, rec), key, 0.0))
            if batch:
                try:
                    appended = await append_batch(world, replay, batch)
                except EntityConflictError:
                    # Another replayer created some of them first (the create-claim): catch up
                    # and plan again from what the log now says.
                    await self._catch_up(replay)
                    continue
                except HookTokenConflictError as err:
                    await self._fail(run_id, "HOOK_CONFLICT", err.message)
                    return True
                except RunTerminalError:
                    return True
                await self._feed(replay, appended)
                for child in children:  # claimed in the parent's log first, then started
                    await start_child(self, replay, child)

            await flush(world, replay)  # nothing below may leave before the completion

            # 2. The decision table for every created, non-terminal step.
            owned: list[StepRecord] = []
            lazy_ids = {r.cid for r in lazy}
            for rec in list(replay.open_steps.values()):
                if rec.cid in lazy_ids:
                    continue
                d = decide(
                    rec.state(),
                    run_id=run_id,
                    correlation_id=rec.cid,
                    my_message_id=my_id,
                    now=now,
                    lease=settings.lease_seconds,
                    ownership_enabled=settings.inline_ownership,
                    arriving_backstop_key=backstop,
                )
                if d.idempotency_key in armed:
                    continue
                if d.action is Action.EXECUTE_OWNED:
                    owned.append(rec)
                elif d.action is Action.ARM_BACKSTOP:
                    armed.add(d.idempotency_key)
                    stats.backstop_wakes_armed += 1
                    log.debug(
                        "run %s step %s owned by %s: backstop wake in %.1fs (%s)",
                        run_id,
                        rec.cid,
                        rec.owner,
                        d.delay_seconds,
                        d.idempotency_key,
                    )
                    sends.append(
                        (
                            FLOW_TOPIC,
                            {
                                "runId": run_id,
                                "reason": "backstop",
                                "backstopKey": d.idempotency_key,
                            },
                            d.idempotency_key,
                            d.delay_seconds,
                        )
                    )
                else:
                    armed.add(d.idempotency_key)
                    sends.append((STEP_TOPIC, _step_payload(run_id, rec), d.idempotency_key, 0.0))
            # 3. Wake-ups for the waits this suspension is blocked on.
            arriving = delivery.payload or {}
            for wait in replay.pending_waits():
                key = f"{run_id}:{wait.cid}"
                if arriving.get("waitId") == wait.cid:
                    # This delivery is that wait's own wake, arriving before the wait is due
                    # by this worker's clock (behind the world's). Its key is still held while
                    # it is in flight, so a re-arm under it would be dropped: use a successor.
                    key = f"{key}:after:{delivery.message_id}"
                if key not in armed:
                    armed.add(key)
                    sends.append(
                        (
                            FLOW_TOPIC,
                            {"runId": run_id, "reason": "wait", "waitId": wait.cid},
                            key,
                            max(0.0, wait.resume_at - now),
                        )
                    )
            for topic, payload, key, delay in sends:
                await world.enqueue(topic, payload, idempotency_key=key, delay_seconds=delay)

            # 4. The inline batch: lazy new steps and owned recovery, all awaited before any ack.
            for rec in owned:
                attempt = rec.starts + 1
                log.warning(
                    "owned recovery: run %s step %s (%s) attempt %d is re-run by its "
                    "owning message %s; a previous delivery died mid-body",
                    run_id,
                    rec.cid,
                    rec.name,
                    attempt,
                    my_id,
                )
                stats.owned_recovery_steps += 1
            inline = [(rec, 1) for rec in lazy] + [(rec, rec.starts + 1) for rec in owned]
            if not inline:
                return True
            stats.inline_steps += len(inline)
            group = InlineBatch(running=len(inline), defer=defer)
            results = await asyncio.gather(
                *(
                    self._run_inline(replay, rec, attempt, my_id, stats, rec in owned, group)
                    for rec, attempt in inline
                )
            )
            events = sorted((e for part in results for e in part), key=lambda e: e.seq)
            if events or group.deferred is None:
                await self._feed(replay, events)
            if group.deferred is not None:
                replay.feed_provisional(group.deferred)
                if replay.needs_stamp:
                    await flush(world, replay)
                    raise Rebuild
            for rec, _ in inline:
                key = step_dispatch_key(run_id, rec.cid)
                if rec.saw_retrying and not rec.terminal:
                    armed.add(key)  # the retry handoff already queued it

    async def _block(self, info: RunInfo, why: str) -> Verdict:
        """Fail closed: never drive a run with another definition. The run waits, visibly,
        until a matching worker comes (its recovery re-arms the run), or fails when this
        worker is told to fail such runs."""
        message = (
            f"run {info.run_id} needs workflow {info.workflow!r} with {why}; "
            "waiting for a worker that has it"
        )
        if self.settings.definition_mismatch == "fail":
            await self._fail(info.run_id, "DEFINITION_MISMATCH", message)
            return ACK
        if info.status is not RunStatus.BLOCKED or (info.error or {}).get("message") != message:
            log.warning("%s", message)
            try:
                await self.world.append(
                    info.run_id,
                    [
                        NewEvent(
                            EventType.RUN_BLOCKED,
                            data={
                                "code": "DEFINITION_MISMATCH",
                                "message": message,
                                "required": info.attributes.get("definition"),
                            },
                        )
                    ],
                )
            except (RunTerminalError, EntityConflictError):
                pass
        return ACK

    async def _run_inline(
        self,
        replay: Replay,
        rec: StepRecord,
        attempt: int,
        my_id: str,
        stats: _Stats,
        recovery: bool,
        group: InlineBatch,
    ) -> list[Event]:
        world, run_id = self.world, replay.run_id
        definition = rec.definition
        assert definition is not None
        stats.inflight_owned.add(rec.cid)
        counted = False
        try:
            events: list[Event] = []
            if recovery:
                if attempt > definition.max_retries + 1:
                    return await self._record(
                        run_id,
                        rec.cid,
                        Failed(
                            {
                                "name": "FatalError",
                                "code": "MAX_ATTEMPTS_EXCEEDED",
                                "message": f"step {rec.name!r} did not finish in "
                                f"{attempt - 1} attempts (its invocations died)",
                            }
                        ),
                        rec.name,
                    )
                # Owned recovery re-stamps its start: an unstamped one would read as unowned
                # to a later wake, which would requeue the step the owner is re-running.
                try:
                    events += await world.append(
                        run_id,
                        [
                            NewEvent(
                                EventType.STEP_STARTED,
                                rec.cid,
                                {"attempt": attempt, "ownerMessageId": my_id},
                            )
                        ],
                    )
                except (EntityConflictError, RunTerminalError):
                    return events

            async def body() -> Outcome:
                if rec.compensates is not None:
                    task = asyncio.current_task()
                    if task is not None:
                        self.protected.add(task)
                        task.add_done_callback(self.protected.discard)
                return await run_step_body(
                    definition,
                    run_id=run_id,
                    step_id=rec.cid,
                    stored_input=rec.input,
                    attempt=attempt,
                    occurrence=rec.occurrence,
                    forward_result=rec.result if rec.compensates else None,
                    world=world,
                )

            if recovery or self.settings.inline_ownership:
                executed, outcome = await world.single_flight.run(f"{run_id}:{rec.cid}", body)
            else:
                # Kill switch: the pre-ownership behaviour, where a fresh inline body took no
                # in-process claim (seed 000's #2780 repro fires twice in this mode).
                executed, outcome = True, await body()
            counted = True
            eligible = not recovery and rec.compensates is None
            if group.finished(rec.cid, outcome if executed else None, eligible=eligible):
                return events  # written with the next batch (see ``deferred``)
            if not executed or outcome is None:
                return events
            events += await self._record(run_id, rec.cid, outcome, rec.name)
            if isinstance(outcome, Retry):
                # The retry handoff: from now on the step is queue-owned (step_retrying lapsed
                # ownership for good) and its message is keyed by the step, never the backstop.
                await world.enqueue(
                    STEP_TOPIC,
                    _step_payload(run_id, rec),
                    idempotency_key=step_dispatch_key(run_id, rec.cid),
                    delay_seconds=max(0.0, outcome.retry_after - clock.now()),
                )
            return events
        finally:
            if not counted:
                group.finished(rec.cid, None, eligible=False)
            stats.inflight_owned.discard(rec.cid)

    async def _record(self, run_id: str, cid: str, outcome: Outcome, name: str) -> list[Event]:
        event = outcome_event(cid, outcome)
        try:
            return await self.world.append(run_id, [event])
        except (EntityConflictError, RunTerminalError, EntityMissingError):
            return []  # another attempt settled it first, or the run ended (cancelled)

    async def _append_inputs(self, replay: Replay, events: list[NewEvent]) -> bool:
        try:
            appended = await self.world.append(replay.run_id, events)
        except RunTerminalError:
            return False
        except EntityConflictError:
            for event in events:  # one of them was already written; write the rest one by one
                try:
                    await self.world.append(replay.run_id, [event])
                except EntityConflictError:
                    pass
                except RunTerminalError:
                    return False
            await self._catch_up(replay)
            return True
        await self._feed(replay, appended)
        return True

    async def _feed(self, replay: Replay, events: list[Event]) -> None:
        if (
            events
            and events[0].seq == replay.last_seq + 1
            and all(b.seq == a.seq + 1 for a, b in itertools.pairwise(events))
        ):
            replay.feed(events)
        else:
            await self._catch_up(replay)

    async def _catch_up(self, replay: Replay) -> None:
        replay.feed(await self.world.list_events(replay.run_id, after_seq=replay.last_seq))

    async def _start(
        self, replay: Replay, defer: bool, pin: WorkflowDefinition | None = None
    ) -> None:
        """Start the workflow function: provisionally, so that ``run_started`` rides on the
        run's first decision batch (see ``deferred``), or written alone. With ``pin``, the
        event records that definition for a run that has none."""
        started = NewEvent(
            EventType.RUN_STARTED, data={"definition": pin.identity_record()} if pin else {}
        )
        if defer:
            replay.feed_provisional(started)
            if replay.needs_stamp:  # it read time before its first suspension
                await flush(self.world, replay)
                raise Rebuild
            return
        try:
            await self.world.append(replay.run_id, [started])
        except (EntityConflictError, RunTerminalError):
            pass  # started (or ended) by another delivery: the log says which
        raise Rebuild

    async def _finish(self, replay: Replay) -> None:
        root = replay.root
        assert root is not None
        exc = root.exception()
        if exc is None:
            try:
                output = encode(root.result(), what=f"result of workflow {replay.workflow.name!r}")
            except SerializationError as err:
                exc = err
            else:
                await terminal(
                    self,
                    replay.run_id,
                    NewEvent(EventType.RUN_COMPLETED, data={"output": output}),
                    replay,
                )
                return
        error = error_to_dict(exc)
        await terminal(
            self, replay.run_id, NewEvent(EventType.RUN_FAILED, data={"error": error}), replay
        )

    async def _fail(self, run_id: str, code: str, message: str) -> None:
        error = {"name": "WaylineError", "code": code, "message": message}
        log.error("run %s failed: [%s] %s", run_id, code, message)
        await terminal(self, run_id, NewEvent(EventType.RUN_FAILED, data={"error": error}))

    # --- step deliveries -----------------------------------------------------------------------
    async def malformed(self, delivery: Delivery, err: Exception) -> Verdict:
        """Set a malformed message aside (never a redelivery loop) and, when it names a run
        that is still live, fail that run: its work can no longer be trusted to arrive."""
        verdict = _malformed(delivery, err)
        payload = delivery.payload or {}
        run_id = payload.get("runId") if isinstance(payload, dict) else None
        if isinstance(run_id, str) and run_id:
            info = await self.world.get_run(run_id)
            if info is not None and not info.status.terminal:
                await self._fail(run_id, "INVALID_PAYLOAD", verdict.reason)
        return verdict

    async def handle_step(self, delivery: Delivery) -> Verdict:
        """A queued step body (see ``step_delivery``)."""
        return await handle_step(self, delivery)


def _pinned_elsewhere(workflow: WorkflowDefinition, events: list[Event]) -> bool:
    """The run was started meanwhile by a worker whose definition this one does not match."""
    for e in events[:3]:
        if e.type is EventType.RUN_STARTED:
            recorded = e.data.get("definition")
            return isinstance(recorded, dict) and workflow.mismatch(recorded) is not None
    return False
