"""What a worker does with one delivery (DESIGN "One delivery, step by step").

A flow delivery checks the delivery budget, replays the run, and then loops: it asks the pure
planner (``_core.planning``) for the next move and carries it out. For a suspension that is
the decision batch (the new hooks, waits, children and steps, one atomic write), the dispatch
decision table for every created, non-terminal step, and the inline batch (lazy new steps and
owned recovery), whose results continue the *same* in-memory replay, until the run suspends
with nothing left to run here or ends. A step delivery runs one queued step body, then
continues into the flow loop under its own message, so owned recovery is never orphaned by an
early return (seed 000, second invariant).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
from opentelemetry import trace

from .. import metrics
from .._core import limits, ordering
from .._core.continuation import ContinueAsNew
from .._core.definitions import WorkflowDefinition
from .._core.dispatch import step_dispatch_key
from .._core.events import Event, EventType, NewEvent, RunStatus
from .._core.forks import key_run_id
from .._core.ids import MessageId, new_run_id
from .._core.messages import Wake, WakeReason
from .._core.planning import (
    CompleteWaits,
    DecisionBatch,
    DisposeHooks,
    Done,
    Finish,
    HandBack,
    Move,
    Paused,
    RunFailure,
    Suspend,
    Unwind,
    decision_batch,
    dispatch_plan,
    fail_move,
    held_delay,
    holds_a_step,
    next_move,
    unwind_move,
)
from .._core.projections import fold
from .._core.replay import Replay, StepRecord
from .._core.serde import encode, error_to_dict
from ..errors import (
    EntityConflictError,
    HookTokenConflictError,
    ReplayDivergenceError,
    RunTerminalError,
    SequenceConflictError,
    SerializationError,
    WorldError,
)
from ..settings import Settings
from ..world import FLOW_TOPIC, Delivery, RunInfo, World, routing
from ..world.sending import send
from . import (
    child_ids,
    debounce_waits,
    divergence,
    handoff,
    history_limits,
    rate_waits,
    step_slots,
    tasks,
    unwind,
)
from .buffered_hooks import take_buffered, waiting_hooks
from .children import ended_with_its_parent, start_child, sync_children
from .concurrency import admit
from .continuation import continue_as_new, start_next
from .deferred import InlineBatch, Rebuild, append_batch
from .ending import fail_run, malformed, report_to_parent, terminal
from .live_replays import LiveReplay, LiveReplays, may_keep
from .messages import ACK, FlowMessage, Stats, Verdict, unseen
from .prompt_wakes import PromptWakes
from .session import RunSession
from .step_delivery import Continue, handle_step

log = logging.getLogger("wayline.runtime")
tracer = trace.get_tracer("wayline")


class Handler:
    def __init__(
        self,
        world: World,
        workflows: Mapping[str, WorkflowDefinition[..., Any]],
        settings: Settings,
        *,
        draining: bool = False,
    ) -> None:
        self.world = world
        self.draining = draining
        """The worker's version is on its way out: it begins no run not pinned yet."""
        self.workflows = dict(workflows)
        self.settings = settings
        self.closing = False
        """Set by ``Worker.close``: reach the next checkpoint, start nothing new."""
        self.pins = {
            name: {*(routing.pin_of(r) for r in w.identity_records()), None}
            for name, w in self.workflows.items()
        }
        """Per workflow, the pins whose routes this worker consumes (None: not pinned yet)."""
        self.protected: set[asyncio.Task[Any]] = set()
        """Tasks running a compensation body: a forced close lets them checkpoint."""
        self.replays = LiveReplays(settings.replay_cache_runs)
        """Replays of suspended runs, for their next wake here (see ``live_replays``)."""
        self.prompt_wakes = PromptWakes(settings.prompt_wake_seconds)
        """Short sleeps woken here, not by their delayed message (see ``prompt_wakes``)."""
        self.spare_slot: Callable[[Delivery], bool] = lambda delivery: True
        """Whether the worker has a slot of the delivery's kind that no delivery holds (the
        worker sets it): a delivery waits in process for a sleep only then, so a run that
        sleeps briefly after each step never keeps the last slot from other runs' messages
        until its hand-off (400 s by default)."""

    # --- deliveries ----------------------------------------------------------------------------
    async def handle_flow(self, delivery: Delivery) -> Verdict:
        try:
            msg = FlowMessage.model_validate(delivery.payload)
        except pydantic.ValidationError as err:
            return await self.malformed(delivery, err)
        if msg.reason == WakeReason.WAIT and self.prompt_wakes.duplicate(
            msg.runId, (msg.model_extra or {}).get("waitId")
        ):
            return ACK  # its wait was woken here (``prompt_wakes``): nothing left to do
        return await self._flow(msg.runId, delivery, msg.backstopKey, mark=_log_mark(delivery))

    async def handle_step(self, delivery: Delivery) -> Verdict:
        """A queued step body (see ``step_delivery``), then the run under the same message."""
        verdict = await handle_step(self.world, self.settings, delivery)
        if not isinstance(verdict, Continue):
            return verdict
        info, events = await self.world.read_run(verdict.run_id)
        if info is None:
            return ACK
        if info.status.terminal:
            return await _ended(self.world, info)
        if info.workflow not in self.workflows:
            await send(self.world, FLOW_TOPIC, Wake(verdict.run_id, WakeReason.STEP).to_wire())
            return ACK
        return await self._flow(verdict.run_id, delivery, read=(info, events))

    async def malformed(self, delivery: Delivery, err: Exception) -> Verdict:
        return await malformed(self.world, delivery, err)

    async def _flow(
        self,
        run_id: str,
        delivery: Delivery,
        backstop: str | None = None,
        *,
        read: tuple[RunInfo | None, list[Event]] | None = None,
        mark: str | None = None,
    ) -> Verdict:
        """Drive the run from one read of it and its log (``read``, when the caller has it;
        none when this process's view still ends at the message's ``mark``), or from the
        run's live replay and the events after it (``live_replays``)."""
        live: tuple[LiveReplay, list[Event]] | None = None
        if read is None:
            live, read = await self._go_on(run_id)
        try:
            return await self._from_read(run_id, delivery, backstop, read, mark, live)
        finally:
            if live is not None and not live[0].driven:
                live[0].replay.close()  # the delivery ended before driving it: never to GC

    async def _from_read(
        self,
        run_id: str,
        delivery: Delivery,
        backstop: str | None,
        read: tuple[RunInfo | None, list[Event]] | None,
        mark: str | None,
        live: tuple[LiveReplay, list[Event]] | None,
    ) -> Verdict:
        if read is None:
            read = await (
                self.world.read_run_at(run_id, mark) if mark else self.world.read_run(run_id)
            )
        info, events = read
        if info is None:
            return unseen(delivery, f"flow message for unknown run {run_id}")
        if info.status.terminal:
            return await _ended(self.world, info)
        if await ended_with_its_parent(self.world, info):
            return ACK
        if info.status is RunStatus.PAUSED:
            # its unpause (or a cancel, which lifts the pause) sends the next wake, except to
            # a step this delivery owns, which the wake takes for a live owner's
            return await self._paused(run_id, delivery, events)
        workflow = self.workflows.get(info.workflow)
        if workflow is None:
            log.warning(
                "run %s needs workflow %r, which this worker does not have; retrying "
                "later for a worker that does",
                run_id,
                info.workflow,
            )
            return Verdict("retry", delay=5.0)
        blocked = info.status is RunStatus.BLOCKED
        refused = await self._admit(info, workflow, delivery)
        if refused is not None:
            return refused
        # _admit may have unblocked the run (an append): its log is then read again.
        return await self._execute(
            info, workflow, delivery, backstop, None if blocked else events, live
        )

    async def _go_on(
        self, run_id: str
    ) -> tuple[tuple[LiveReplay, list[Event]] | None, tuple[RunInfo | None, list[Event]] | None]:
        """The run's live replay and the events to feed it, when it has one that the log
        continues exactly; else the read the delivery drives from (None: read it)."""
        held = self.replays.take(run_id)
        if held is None:
            return None, None
        try:
            info, tail = await self.world.read_run_after(run_id, held.last.seq - 1)
        except BaseException:
            held.replay.close()  # closed here, not wherever the collector finds it (``close``)
            raise
        if info is None or info.status.terminal:
            held.replay.close()
            return None, (info, [])  # as read_run answers for an ended (or unknown) run
        new = held.continued_by(tail)
        workflow = self.workflows.get(info.workflow)
        if (
            new is None
            or info.status is not RunStatus.RUNNING
            or workflow is not held.replay.workflow
            or workflow.mismatch(info.attributes.get("definition")) is not None
        ):
            log.debug("run %s: its live replay is stale, replayed from the log", run_id)
            held.replay.close()
            return None, None
        return (held, new), (info, [])

    async def _admit(
        self, info: RunInfo, workflow: WorkflowDefinition[..., Any], delivery: Delivery
    ) -> Verdict | None:
        """The delivery budget and the definition check; None: drive the run."""
        limit = self.settings.max_queue_deliveries
        if delivery.topic == FLOW_TOPIC and delivery.attempt > limit:
            message = (
                f"flow delivery attempt {delivery.attempt} exceeds "
                f"WORKFLOW_MAX_QUEUE_DELIVERIES={limit}"
            )
            metrics.DELIVERY_BUDGET_FAILURES.inc()
            await fail_run(self.world, info.run_id, "MAX_DELIVERIES_EXCEEDED", message, by="worker")
            return ACK
        why = workflow.mismatch(info.attributes.get("definition"))
        if why is not None:
            return await self._block(info, why, delivery)
        if self.draining and _unpinned_on_a_queue(info):
            # A queue has one route for every version, so routing cannot keep a draining
            # worker from a run's first delivery (``routing.served_topics``): it is handed
            # back here, no attempt spent, for the current version to begin and pin.
            await self.world.release(delivery, random.uniform(1.0, 3.0))
            return Verdict("none")
        if (
            info.status is RunStatus.BLOCKED
            and info.started_at is not None
            and not divergence.held(info)
            and not step_slots.waiting(info)  # lifted by the waiting step when it gets a slot
            and not rate_waits.step_waiting(info)  # or a token
        ):
            try:
                await self.world.append(info.run_id, [NewEvent(EventType.RUN_UNBLOCKED)])
            except EntityConflictError:
                pass
            except RunTerminalError:
                return ACK
        return None

    async def _execute(
        self,
        info: RunInfo,
        workflow: WorkflowDefinition[..., Any],
        delivery: Delivery,
        backstop: str | None,
        read: list[Event] | None,
        live: tuple[LiveReplay, list[Event]] | None = None,
    ) -> Verdict:
        """Replay the run and drive it, from ``read`` (the log as read with ``info``) first,
        or from ``live`` (a replay left by the run's last delivery here, and the events after
        it), then again from the log whenever the live replay must be rebuilt (see
        ``deferred``), inside the delivery's ``workflow.execute`` span."""
        run_id = info.run_id
        # A run started by name (no definition recorded) is pinned to this worker's definition
        # by its run_started: from then on, only a matching worker drives it.
        pin = None if isinstance(info.attributes.get("definition"), dict) else workflow
        stats = Stats()
        attributes = {
            "workflow.name": workflow.name,
            "workflow.run.id": run_id,
            "messaging.message.id": str(delivery.message_id),
        }
        with tracer.start_as_current_span("workflow.execute", attributes=attributes) as span:
            # A debounced run writes its run_started alone, before anything runs (see
            # ``_start``); a wake that goes on from a live replay keeps its last deferral.
            defer = info.attributes.get("debounce") is None if live is None else live[0].defer
            replay: Replay | None = None
            kept = False
            known: list[Event] = []  # the log as last read: a rebuild reads only what follows
            try:
                while True:
                    if live is not None:  # a rebuild after it reads the whole log (known is empty)
                        replay, live[0].driven = live[0].replay, True
                        events, live = self._resume(replay, live[1], delivery.attempt), None
                    else:
                        if replay is not None:
                            replay.close()  # rebuilt: the old one's waiting coroutines end here
                        replay = Replay(workflow, run_id)
                        replay.parent = info.attributes.get("parent")
                        replay.delivery_attempt = delivery.attempt
                        with metrics.timed(metrics.REPLAY_SECONDS):
                            events = (
                                read if read is not None else await _log(self.world, run_id, known)
                            )
                            read, known = None, events
                            if pin is not None and _pinned_elsewhere(pin, events):
                                return Verdict("retry", delay=0.0)  # check the new pin again
                            replay.feed(events)
                    ordering.follow(replay.ordering)
                    info = await divergence.lift(self.world, info)
                    if not await self._may_begin(info, workflow, replay, delivery, events):
                        return ACK  # it waits (see ``_may_begin``): a later message comes
                    session = self._session(info, replay, delivery, backstop, stats)
                    driven = await self._invoke(session, defer, pin)
                    if driven is None:  # rebuilt: the first rebuild ends deferral if it read time
                        defer = defer and not replay.needs_stamp
                        continue
                    if not driven:
                        await stats.bodies.drain()  # never leave under a running body
                        return await handoff.leave(self.world, self.closing, run_id, delivery)
                    # a body still running writes an outcome this replay has not seen: dropped
                    kept = not stats.bodies.pending and self._keep(replay, defer)
                    break
            except ReplayDivergenceError as err:
                await stats.bodies.drain()
                return await divergence.set_aside(self.world, info, err)
            except asyncio.CancelledError:
                await stats.bodies.settle(cancel=True)
                raise
            finally:
                try:
                    await stats.settled()  # every body and every withdrawal first
                finally:  # a forced close may cancel the handler there: still closed here
                    self._left(replay, kept)
                    _close_span(span, stats, delivery)
        if stats.held:  # after every body settled, as any other verdict
            return await self._hand_back_held(run_id, delivery, None)
        return ACK

    def _left(self, replay: Replay | None, kept: bool) -> None:
        """A delivery ends: a wait taken to wake here that it leaves pending (a pause read
        after the wait, a hand-back, an error) is left to its own message, and its replay is
        closed unless it is kept for the run's next wake."""
        if replay is not None:
            self.prompt_wakes.handed_back(replay)
            if not kept:
                replay.close()

    async def _paused(self, run_id: str, delivery: Delivery, events: list[Event]) -> Verdict:
        """A delivery for a paused run: acknowledged, unless it owns a step the pause holds
        (its owner died mid-body and this is its redelivery), which only it can run."""
        if not holds_a_step(str(delivery.message_id), fold(run_id, events).steps.values()):
            return ACK
        paused = [e.created_at for e in events if e.type is EventType.RUN_PAUSED]
        return await self._hand_back_held(run_id, delivery, paused[-1] if paused else None)

    async def _hand_back_held(
        self, run_id: str, delivery: Delivery, paused_at: float | None
    ) -> Verdict:
        """Hand back a delivery that owns a step its run's pause holds (``holds_a_step``): no
        delivery is counted, and it comes back every few seconds (longer as the pause ages)
        until the unpause lets it run the step as owned recovery."""
        delay = held_delay(
            paused_at, self.world.now(), self.settings.held_delay_seconds, delivery.held_handbacks
        )
        log.info(
            "run %s is paused over a step its message %s owns: handed back for %.1fs",
            run_id,
            delivery.message_id,
            delay,
        )
        await self.world.release(delivery, delay, held=True)
        return Verdict("none")

    def _session(
        self, info: RunInfo, replay: Replay, delivery: Delivery, backstop: str | None, stats: Stats
    ) -> RunSession:
        return RunSession(
            self.world,
            self.settings,
            replay,
            delivery,
            backstop=backstop,
            stats=stats,
            protected=self.protected,
            namespace=_namespace(info),
            key_run=key_run_id(info.run_id, info.attributes),
        )

    def _resume(self, replay: Replay, events: list[Event], attempt: int) -> list[Event]:
        """Feed the run's live replay the events after it (``live_replays``); returns what the
        delivery drives from besides (nothing: the run has begun)."""
        replay.delivery_attempt = attempt
        with metrics.timed(metrics.REPLAY_SECONDS):
            replay.feed(events)
        self.replays.hits += 1
        return []

    def _keep(self, replay: Replay, defer: bool) -> bool:
        """Leave the replay of a run suspended here to its next wake; True when it is kept."""
        last = replay.last_event
        if (
            self.closing
            or self.replays.size == 0
            or not may_keep(replay)
            or last is None
            or last.seq != replay.last_seq
        ):
            return False
        self.replays.keep(LiveReplay(replay, last, defer))
        return True

    async def _invoke(
        self, session: RunSession, defer: bool, pin: WorkflowDefinition[..., Any] | None
    ) -> bool | None:
        """One pass over a replay built from the log: True when the run is driven as far as
        this delivery goes, False when handed back (closing), None when it must be rebuilt."""
        replay = session.replay
        await sync_children(session)
        try:
            # a run paused before it started is started by the delivery after its unpause:
            # a start written over the pause is refused, and would be tried again and again
            if replay.root is None and replay.terminal is None and not replay.ending.paused:
                if not session.stats.started:
                    session.stats.started = True
                    name = replay.workflow.name
                    log.info(
                        "run %s started: workflow %s",
                        replay.run_id,
                        name,
                        extra={"run_id": replay.run_id, "workflow": name},
                    )
                await self._start(session, defer, pin)
            driven = await self._drive(session, defer)
        except Rebuild:
            session.stats.rebuilds += 1
            log.debug(
                "run %s: replay rebuilt from the log (%s)",
                replay.run_id,
                "it read time during a provisional event"
                if replay.needs_stamp
                else "the log moved under a provisional event",
            )
            return None
        if replay.provisional:
            log.error(
                "invariant violated: delivery %s returns with run %s's %s unwritten",
                session.delivery.message_id,
                replay.run_id,
                [str(e.type) for e in replay.provisional],
            )
        return driven

    # --- the executor of the planner's moves -----------------------------------------------------
    async def _drive(self, session: RunSession, defer: bool = True) -> bool:
        """Carry out the planner's moves until the run suspends with nothing left to run here
        or ends. Returns False when the worker is closing and the run was handed back
        unfinished (its message is then redelivered, to this worker's replacement or
        another). With ``defer``, the last completion of an inline batch rides on the next
        write (see ``deferred``); raises :class:`Rebuild` when the replay must be built
        again."""
        armed: set[str] = set()
        bodies = session.stats.bodies
        # Once the unwind began under this delivery, no pause stops it between two moves, as
        # one call did before it was planned. The history limit never fails a run whose unwind
        # is recorded, under this delivery or a later one: it would end the run with its
        # reversals owed. A closing worker or a delivery past its hand-off time hands the run
        # back between two moves, as between two steps (never under a running reversal, which
        # would be cut off at the invocation bound).
        unwinding = False
        arrival = session.arrival
        while True:
            if bodies.pending and bodies.must_settle_first(session.replay):
                # about to unwind: never under a body that is still running (seed 000)
                await session.flush()
                await bodies.drain()
                await session.catch_up()
                continue
            begun = unwinding or session.replay.ending.phase != "running"
            if not begun and await history_limits.check(session):
                return True  # failed: past the limit of one run's log
            closing = handoff.stop_here(self.closing)
            move: Move
            if not unwinding:
                move = next_move(session.replay, closing=closing, now=self.world.now())
            elif session.replay.terminal is not None:
                move = Done()
            else:
                move = HandBack() if closing else Unwind()
            match move:
                case Done():
                    return True
                case Paused():
                    await session.flush()  # a completion carried provisionally is written
                    # a re-stamp refused over the pause leaves the step stamped by this
                    # delivery: it is handed back to run it after the unpause
                    session.stats.held = holds_a_step(session.my_id, session.replay.steps.values())
                    self.prompt_wakes.handed_back(session.replay)  # its waits: their messages
                    return True
                case HandBack():
                    await bodies.drain()  # never hand off under an owned, running body
                    await session.flush()
                    self.prompt_wakes.handed_back(session.replay)  # its waits: their messages
                    return False
                case Unwind():  # one move of the saga unwind, planned like the others
                    if not unwinding:  # its moves write as they go: nothing provisional after
                        await session.flush()
                    unwinding = True
                    step = unwind_move(
                        session.replay,
                        arrival,
                        now=self.world.now(),
                        lease=self.settings.lease_seconds,
                        ownership=self.settings.inline_ownership,
                    )
                    if not await unwind.carry_out(session, step):
                        return True
                case Finish():
                    await self._finish(session)  # carries a provisional completion
                    return True
                case CompleteWaits(events) | DisposeHooks(events):
                    await session.flush()
                    if not await session.append_inputs(events):
                        return True
                    self._retire(session, events)  # the stored wakes taken here: withdrawn
                case Suspend(now):
                    suspended = await self._suspend(session, now, armed, defer)
                    if isinstance(suspended, RunFailure):
                        if not await self._fail_refused(session, suspended):
                            return True
                    elif not suspended and not await self._wake_here(session):
                        return True

    async def _wake_here(self, session: RunSession) -> bool:
        """Wait in this process for the run's first sleep or timeout when it is due within
        ``prompt_wake_seconds``, then read what reached the log meanwhile: True to drive the
        run on under this delivery, False to leave it to the delayed message armed for it
        (see ``prompt_wakes``). Never under a running body, nor when the worker closes or the
        delivery is due to be handed off. If the worker dies in the wait, the delayed message
        wakes the run, or, when it came first and was taken for a duplicate, this delivery
        does, redelivered after its visibility."""
        now = self.world.now()
        if self.prompt_wakes.taken(session.replay):
            # Woken here already, its delayed message maybe acknowledged unread: only this
            # delivery can wake it, so it waits out what the clock says is left (at most
            # the horizon a pass) whatever else holds.
            left = min(w.resume_at for w in session.replay.pending_waits()) - now
            await asyncio.sleep(min(max(0.0, left), max(self.prompt_wakes.horizon, 0.01)))
            await session.catch_up()
            return True
        if session.stats.bodies.pending or handoff.stop_here(self.closing):
            return False
        if not self.spare_slot(session.delivery):
            return False  # the last slot: other runs' messages may be waiting for it
        delay = self.prompt_wakes.due_in(session.replay, now)
        if delay is None:
            return False
        # Taken from here on: the wait's delayed message is acknowledged unread if it comes
        # first, so the drive goes on after the sleep whatever happens (a close or a hand-off
        # due by then is the next move's, which hands the run back under a message of its own).
        self.prompt_wakes.woke(session.replay, now + delay)
        await asyncio.sleep(delay)
        # Read what reached the log meanwhile before the wake is written, as a delivered wake
        # reads the run first: a pause asked in the wait must hold the sleep's completion
        # back until the unpause (the completion is not fenced on the log it was decided on).
        await session.catch_up()
        return True

    def _retire(self, session: RunSession, events: list[NewEvent]) -> None:
        """Withdraw the delayed messages of the waits just completed (stored) that this
        process took to wake (``prompt_wakes``), beside the drive: its next write need not
        wait for the withdrawal's answer. A cancel that fails or comes too late leaves the
        message to come: it is acknowledged as a duplicate here, or found completed
        elsewhere."""
        completed = [
            e.correlation_id
            for e in events
            if e.type is EventType.WAIT_COMPLETED and e.correlation_id is not None
        ]
        for message_id in self.prompt_wakes.retire(session.run_id, completed):
            tasks.spawn(
                self._withdraw(session.run_id, message_id),
                f"wayline-withdraw-{message_id}",
                session.stats.withdrawals,
            )

    async def _withdraw(self, run_id: str, message_id: MessageId) -> None:
        try:
            if await self.world.cancel_delayed(message_id):
                self.prompt_wakes.retired += 1
        except WorldError as err:
            log.debug("run %s: withdrawing wake %s failed: %r", run_id, message_id, err)

    @staticmethod
    async def _fail_refused(session: RunSession, failure: RunFailure) -> bool:
        """The world refused the decision batch just written, a failure of the run: what it
        does to the run is planned at once on the replay the batch was decided on (nothing is
        checked or written in between). False when the run ended (here or meanwhile)."""
        failing = fail_move(session.replay, failure)
        return not isinstance(failing, Done) and await unwind.carry_out(session, failing)

    async def _suspend(
        self, session: RunSession, now: float, armed: set[str], defer: bool
    ) -> bool | RunFailure:
        """One suspension: the decision batch, the dispatch, the inline batch. False when the
        delivery is done with the run; True to plan again; a :class:`RunFailure` when the world
        refused the batch as a failure of the run (the planner's ``fail_move`` says what next)."""
        replay, settings = session.replay, self.settings
        batch = decision_batch(
            replay,
            my_id=session.my_id,
            max_inline=settings.max_inline_steps,
            new_run_id=new_run_id,
            lease=settings.lease_seconds,
        )
        armed.update(send.key for send in batch.sends)
        created = list(replay.new_hooks.values())
        if not session.hooks_looked:
            session.hooks_looked = True
            created += waiting_hooks(replay)
        written = await self._write_batch(session, batch)
        if isinstance(written, RunFailure):
            return written
        if written is not True:
            return written is None  # None: conflict, caught up, plan again
        await session.flush()  # nothing below may leave before the completion
        if created and await take_buffered(self.world, replay.run_id, session.namespace, created):
            await session.catch_up()  # the payloads sent before the wait, taken just now
        plan = dispatch_plan(
            replay,
            session.arrival,
            now=now,
            lease=settings.lease_seconds,
            ownership=settings.inline_ownership,
            # new, or running here: this delivery executes it already
            skip={rec.cid for rec in batch.lazy} | session.stats.inflight_owned,
            armed=armed,
        )
        for rec, wake in plan.backstops:
            session.stats.backstop_wakes_armed += 1
            log.debug(
                "run %s step %s owned by %s: backstop wake in %.1fs (%s)",
                replay.run_id,
                rec.cid,
                rec.owner,
                wake.delay,
                wake.key,
            )
        sends = [*batch.sends, *plan.sends]
        self.prompt_wakes.armed(replay.run_id, sends, await session.send(sends))
        return await self._inline(session, batch.lazy, plan.owned, armed, defer)

    async def _write_batch(
        self, session: RunSession, batch: DecisionBatch
    ) -> bool | RunFailure | None:
        """Write the decision batch and start its children. True: written; None: another
        replayer created some of it first (caught up); False: the run has ended; a
        :class:`RunFailure`: the world refused the batch as a failure of the run."""
        if not batch.events:
            return True
        refused = await child_ids.name_children(self.world, session.replay, batch)
        for child, run_id in batch.children:
            child.run_id = run_id
        try:
            appended = await append_batch(self.world, session.replay, batch.events, fenced=True)
        except (EntityConflictError, SequenceConflictError):
            # Another replayer created some of them first (the create-claim), or the log moved
            # since the batch was decided (a cancel request, a payload: nothing decided on a
            # log without them is written): catch up and plan again from what the log says.
            await session.catch_up()
            return None
        except HookTokenConflictError as err:  # a failure of the run: unwound as any other
            fields = {"token": err.token, "holderRunId": err.holder}
            return RunFailure("HOOK_CONFLICT", err.message, fields)
        except RunTerminalError:
            return False
        await session.feed(appended)
        for child, _ in batch.children:  # claimed in the parent's log first, then started
            await start_child(self.world, session.replay, child)
        await child_ids.wake_refused(self.world, session.replay, refused)
        return True

    async def _inline(
        self,
        session: RunSession,
        lazy: list[StepRecord],
        owned: list[StepRecord],
        armed: set[str],
        defer: bool,
    ) -> bool:
        """The inline batch: lazy new steps and owned recovery, all awaited before any ack.
        False when there is none (the run is suspended on others)."""
        replay, stats = session.replay, session.stats
        for rec in owned:
            spent = rec.definition is not None and rec.spent > rec.definition.max_retries
            log.warning(
                "owned recovery: run %s step %s (%s) attempt %d %s by its owning message %s; "
                "a previous delivery died mid-body",
                replay.run_id,
                rec.cid,
                rec.name,
                rec.spent + 1,
                "is past its attempts and recorded failed" if spent else "is re-run",
                session.my_id,
            )
            stats.owned_recovery_steps += 1
        inline = [(rec, 1, False) for rec in lazy] + [(rec, rec.spent + 1, True) for rec in owned]
        if not inline and not stats.bodies.pending:
            return False
        stats.inline_steps += len(inline)
        # The run moves on as soon as one body settles; the rest keep running (``inflight``).
        group = InlineBatch(running=len(inline), defer=defer and not stats.bodies.pending)
        if inline:
            events = await stats.bodies.start(
                [
                    session.run_inline(rec, attempt, recovery, group)
                    for rec, attempt, recovery in inline
                ],
                group,
            )
        else:
            events = await stats.bodies.next()
        if events or group.deferred is None:
            await session.feed(events)
        if group.deferred is not None:
            replay.feed_provisional(group.deferred)
            if replay.needs_stamp:
                await session.flush()
                raise Rebuild
        for rec, _, _ in inline:
            if rec.saw_retrying and not rec.terminal:
                armed.add(step_dispatch_key(replay.run_id, rec.cid))  # the retry handoff queued it
        return True

    # --- the ends of a run ---------------------------------------------------------------------
    async def _block(self, info: RunInfo, why: str, delivery: Delivery) -> Verdict:
        """Fail closed: never drive a run with another definition. Routing keeps a pinned
        run's messages from workers of other definitions (``routing``); one that still comes
        here was sent before the run was pinned (on its workflow's route). It is sent on to
        the run's own route, where it waits for a matching worker (``runs show`` says
        ``waiting_for_worker`` while none is alive), or the run fails when this worker is told
        to fail such runs. A run that recorded no identity to route by (only a code hash
        differs), or that is on a ``queue`` (one route for every definition), waits visibly,
        blocked, until a matching worker's recovery re-arms it."""
        message = (
            f"run {info.run_id} needs workflow {info.workflow!r} with {why}; "
            "waiting for a worker that has it"
        )
        if self.settings.definition_mismatch == "fail":
            await fail_run(self.world, info.run_id, "DEFINITION_MISMATCH", message, by="worker")
            return ACK
        pin = routing.pin_of(info.attributes.get("definition"))
        if pin not in self.pins.get(info.workflow, ()) and not info.attributes.get("queue"):
            # a queue's route is not split by definition: sent on, it would come straight back
            log.info("run %s sent on to its own route: %s", info.run_id, message)
            await send(
                self.world,
                FLOW_TOPIC,
                Wake(info.run_id, WakeReason.ROUTE).to_wire(),
                idempotency_key=f"{info.run_id}:route:{delivery.message_id}",
            )
            return ACK
        if info.status is not RunStatus.BLOCKED or (info.error or {}).get("message") != message:
            log.warning("%s", message)
            blocked = {
                "code": "DEFINITION_MISMATCH",
                "message": message,
                "required": info.attributes.get("definition"),
            }
            try:
                await self.world.append(
                    info.run_id, [NewEvent(EventType.RUN_BLOCKED, data=blocked)]
                )
            except (RunTerminalError, EntityConflictError):
                pass
        if info.attributes.get("queue"):  # another worker on the queue may have it: no attempt
            await self.world.release(delivery, random.uniform(1.0, 3.0))
            return Verdict("none")
        return ACK

    async def _may_begin(
        self,
        info: RunInfo,
        workflow: WorkflowDefinition[..., Any],
        replay: Replay,
        delivery: Delivery,
        events: list[Event],
    ) -> bool:
        """False when a run that has not begun must wait, and a later message of its own
        comes back for it: a debounced run's quiet period goes on, or it has no concurrency
        slot or no rate limit's token yet. A run that began (or ended) goes on."""
        if replay.root is not None or replay.terminal is not None:
            return True
        if await debounce_waits.waited(self.world, info, events, replay, delivery):
            return False
        return await admit(self.world, info, workflow, replay, delivery) and (
            await rate_waits.admit(self.world, info, workflow, replay, delivery)
        )

    async def _start(
        self, session: RunSession, defer: bool, pin: WorkflowDefinition[..., Any] | None = None
    ) -> None:
        """Start the workflow function: provisionally, so that ``run_started`` rides on the
        run's first decision batch (see ``deferred``), or written alone. With ``pin``, the
        event records that definition for a run that has none."""
        replay = session.replay
        started = NewEvent(
            EventType.RUN_STARTED, data={"definition": pin.identity_record()} if pin else {}
        )
        if defer:
            replay.feed_provisional(started)
            if replay.needs_stamp:  # it read time before its first suspension
                await session.flush()
                raise Rebuild
            return
        try:
            # Only on the log the decision to begin was made on: a debounced start that
            # collapsed into the run meanwhile (``run_debounced``) starts its quiet period
            # again, which the rebuild then waits out instead of beginning at once. (Riding
            # on the first decision batch, it would be written after such a start, and an
            # inline body would run the input that start replaced.)
            await self.world.append(replay.run_id, [started], expected_seq=replay.last_seq)
        except (EntityConflictError, RunTerminalError, SequenceConflictError):
            pass  # started (or ended) by another delivery, or the log moved: it says which
        raise Rebuild

    async def _finish(self, session: RunSession) -> None:
        replay = session.replay
        root = replay.root
        assert root is not None
        exc = root.exception()
        if isinstance(exc, ContinueAsNew):
            await continue_as_new(self.world, replay, exc)
            return
        if exc is None:
            try:
                output = encode(root.result(), what=f"result of workflow {replay.workflow.name!r}")
                limits.check(output, "result", f"the result of workflow {replay.workflow.name!r}")
            except SerializationError as err:
                exc = err
            else:
                completed = NewEvent(EventType.RUN_COMPLETED, data={"output": output})
                await terminal(self.world, replay.run_id, completed, replay)
                return
        failed = NewEvent(EventType.RUN_FAILED, data={"error": error_to_dict(exc)})
        await terminal(self.world, replay.run_id, failed, replay)


def _close_span(span: trace.Span, stats: Stats, delivery: Delivery) -> None:
    if stats.inflight_owned:
        log.error(
            "invariant violated: delivery %s returns while owned steps %s are still running "
            "(seed 000: no path acks the owning message while an owned step is non-terminal)",
            delivery.message_id,
            stats.inflight_owned,
        )
    metrics.OWNED_RECOVERIES.inc(stats.owned_recovery_steps)
    metrics.BACKSTOPS_ARMED.inc(stats.backstop_wakes_armed)
    span.set_attribute("workflow.inline_ownership.owned_recovery_steps", stats.owned_recovery_steps)
    span.set_attribute("workflow.inline_ownership.backstop_wakes_armed", stats.backstop_wakes_armed)
    span.set_attribute("workflow.steps.inline", stats.inline_steps)
    span.set_attribute("workflow.replay.rebuilds", stats.rebuilds)


async def _log(world: World, run_id: str, known: list[Event]) -> list[Event]:
    """The run's log, reading only what came after ``known``, the log as this delivery read it
    before a rebuild: a log only grows, so what was read is still its head. A rebuild comes
    on nearly every wake of a run that reads time while a step's completion is provisional
    (a sleep after a step): reading the whole log again made each wake read it twice."""
    if not known:
        return await world.list_events(run_id)
    return [*known, *await world.list_events(run_id, after_seq=known[-1].seq)]


def _unpinned_on_a_queue(info: RunInfo) -> bool:
    """A run on a queue that has not begun and records no definition: the first worker to
    begin it pins it to its own (``_start``)."""
    return (
        bool(info.attributes.get("queue"))
        and info.started_at is None
        and not isinstance(info.attributes.get("definition"), dict)
    )


def _pinned_elsewhere(workflow: WorkflowDefinition[..., Any], events: list[Event]) -> bool:
    """The run was started meanwhile by a worker whose definition this one does not match."""
    for e in events[:3]:
        if e.type is EventType.RUN_STARTED:
            recorded = e.data.get("definition")
            return isinstance(recorded, dict) and workflow.mismatch(recorded) is not None
    return False


async def _ended(world: World, info: RunInfo) -> Verdict:
    """A message for a run that has ended. A child reports its end again: the delivery that
    ended it may have died before its report reached the parent (or before the parent's
    wake), and a parent that waits on the child has nothing else to wake it."""
    await report_to_parent(world, info)
    await start_next(world, info)  # a continue whose delivery died before its next run began
    return ACK


def _namespace(info: RunInfo) -> str | None:
    namespace = info.attributes.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else None


def _log_mark(delivery: Delivery) -> str | None:
    """The message's ``logMark`` (``World.log_mark``) on its first delivery; anything else
    in that field is passed over (a mark only spares a read)."""
    mark = (delivery.payload or {}).get("logMark")
    if delivery.attempt != 1 or not isinstance(mark, str) or not 0 < len(mark) <= 64:
        return None
    return mark
