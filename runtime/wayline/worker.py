"""``wayline.Worker``: consumes the flow and step topics of a world and executes them.

Deliveries are held (renewed every third of the visibility period) while their handler runs
and settled only after it returns, which is after every inline body it started has settled.
Each held delivery has a fence (``_engine.fencing``): at ``max_invocation_seconds`` (or a
step's ``timeout=``), or when renewals keep failing, the worker stops renewing and cuts off
the bodies running under it, and the run is handed off; a body that cannot be cut off and is
still running just before the delivery could be redelivered makes the process exit, so a
redelivery never runs beside its previous holder.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from . import logs, metrics, telemetry
from ._core import limits, ordering
from ._core.cancels import cancels, stop_if_cancelled
from ._core.definitions import WorkflowDefinition, workflows_by_name
from ._core.events import RunStatus
from ._core.messages import Wake, WakeReason
from ._core.projections import fold
from ._engine import divergence
from ._engine.delivery_slots import Slots
from ._engine.fencing import Fence, exit_if_executing, hold
from ._engine.handler import Handler
from ._engine.lost_starts import LostStarts
from ._engine.messages import Verdict
from ._engine.tasks import spawn
from .errors import (
    ConfigurationError,
    CorruptEntryError,
    WaylineError,
    WorldStorageFullError,
    WorldUnavailableError,
)
from .settings import Settings
from .waits import wait_set
from .world import FLOW_TOPIC, STEP_TOPIC, Delivery, World, patience
from .world.ports import WorkQueue
from .world.registry import served_entries, withdrawn_entries
from .world.routing import served_topics
from .world.sending import send

log = logging.getLogger("wayline.worker")


# How long (seconds) one receive waits for a message when each topic of a kind has a slot
# of its own to poll with (``_poll_seconds``).
_POLL_SECONDS = 0.5

# How long (seconds) a message that a receive brought with no slot free waits in hand for one
# before it is handed back: the drive of one flow delivery usually ends well within it, so
# the message is handled without another round trip, while one that would wait out a long
# drive goes back to the queue, where another worker may take it. Twice the receive's long
# poll: no longer than the old receive loops made a due message wait behind other polls.
_IN_HAND_SECONDS = 1.0

# The pauses (seconds) before each further try of a withdrawal that failed: three tries in
# all within about a second, short beside the default shutdown grace (30 s), so a world that
# is closed or gone does not hold a close up much longer than before.
_WITHDRAW_PAUSES = (0.2, 0.8)


def _poll_seconds(topics: int, concurrency: int) -> float:
    """How long each receive of a kind waits for a message, so that an idle worker asks its
    world no more often than when a poll held a slot. Then at most ``concurrency`` of the
    kind's ``topics`` polled at once, each for ``_POLL_SECONDS``; now every topic polls while
    a slot is free, so with fewer slots than topics each poll waits longer in proportion
    (with one flow slot and a workflow's three flow topics, 1.5 s): the same number of
    receives a second, and none of them keeps a due message from the receive of its topic.
    A receive still answers as soon as a message is due, so the wait costs no latency."""
    return _POLL_SECONDS * topics / max(1, min(topics, concurrency))


class Worker:
    def __init__(
        self,
        world: World,
        workflows: Iterable[WorkflowDefinition[..., Any]] = (),
        *,
        flow_concurrency: int = 64,
        step_concurrency: int = 64,
        settings: Settings | None = None,
        recover: bool = True,
        exit_on_invocation_deadline: bool = False,
        shutdown_grace_seconds: float = 30.0,
        queue: str | None = None,
        heartbeat_seconds: float = 10.0,
        draining: bool | None = None,
    ) -> None:
        """``queue``: consume the runs started with this ``queue=`` instead of those of
        ``workflows`` by name (a group of workflows served by one deployment). ``recover``:
        re-arm the live runs of ``workflows`` that have no wake coming when it starts
        (``recover_runs``), and while it runs, now and then, those left pending by a start
        that died between its two writes (``Settings.start_rearm_seconds``). ``draining``:
        drive only the runs already pinned to ``workflows``' definitions and take no new run
        (``routing.served_topics``); None: ``Settings.worker_draining``."""
        self.world = world
        self.queue = queue
        self.heartbeat_seconds = heartbeat_seconds
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.settings = settings or Settings.from_env()
        self.workflows = workflows_by_name(workflows)
        self.draining = self.settings.worker_draining if draining is None else draining
        check_bounds(self.settings, world.visibility_seconds)
        self.handler = Handler(world, self.workflows, self.settings, draining=self.draining)
        self.handler.spare_slot = self._spare_slot
        self.flow_concurrency = flow_concurrency
        self.step_concurrency = step_concurrency
        self.recover = recover
        self.exit_on_invocation_deadline = exit_on_invocation_deadline
        """Kept for compatibility, no effect: every worker fences the same way (it exits only
        when a body that cannot be cut off would outlive its delivery)."""
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self._tasks: set[asyncio.Task[Any]] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._held: dict[int, tuple[Delivery, Fence]] = {}
        self._busy: dict[Slots, list[int]] = {}
        """Per kind's slots (flow, step): how many deliveries hold one, and how many there are."""
        self._slots_of: dict[int, Slots] = {}
        """The slots each delivery being handled holds one of (by ``id`` of the delivery)."""
        self._late: list[Delivery] = []
        """Received as the stop came: ``close`` hands them back once its consumers ended."""
        self._handing_back: list[Delivery] = []
        """What the close in progress hands back at its end (kept for the forced close that
        follows one cancelled midway)."""
        self._closed = False  # the renewer's end: set once nothing is held any more
        self._stopping = asyncio.Event()
        self._started = False
        self.failure: BaseException | None = None

    async def __aenter__(self) -> Worker:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        stops = cancels()
        try:
            limits.install(self.settings.limits)  # inherited by every task spawned below
            await self.world.start()
            await self._warn_if_lazy()
            await self._heartbeat()
            if self.recover:
                await self.recover_runs()
            # A stop that a world call swallowed (``asyncio.wait_for`` before Python 3.12, in
            # the NATS client) would let the worker spawn its consumers and serve on.
            stop_if_cancelled(stops)
        except BaseException as err:  # nothing was spawned yet: a later start() begins again
            self._started = False
            if isinstance(err, Exception):
                # a stop that a world call swallowed before the start failed: the stop, not
                # the error, or a caller that starts again on a world error serves on
                stop_if_cancelled(stops)
            raise
        # Routing, not bouncing: one consumer per route this worker serves (and the plain
        # topic), sharing one concurrency budget per kind.
        for kind, concurrency in (
            (FLOW_TOPIC, self.flow_concurrency),
            (STEP_TOPIC, self.step_concurrency),
        ):
            topics = served_topics(
                kind, self.workflows.values(), self.queue, draining=self.draining
            )
            slots = Slots(concurrency)
            self._busy[slots] = [0, concurrency]
            cap = max(1, concurrency // len(topics))
            wait = _poll_seconds(len(topics), concurrency)
            for topic in topics:
                spawn(
                    self._consume(topic, slots, cap, wait),
                    f"wayline-{topic}-consumer",
                    self._tasks,
                )
        spawn(self._renew_loop(), "wayline-renewer", self._tasks)
        spawn(self._heartbeat_loop(), "wayline-heartbeat", self._tasks)
        if self.recover and self.workflows and self.settings.start_rearm_seconds > 0:
            spawn(self._rearm_loop(), "wayline-rearm", self._tasks)

    async def _warn_if_lazy(self) -> None:
        """One warning line when the store acknowledges writes before they are on disk: an
        acknowledged append is a recorded step result, and such a store loses it in an OS
        crash, so the step runs again. A check that cannot be made is logged and skipped;
        it never stops the worker. Bounded: a NATS world asks each monitoring endpoint of
        ``WAYLINE_NATS_MONITOR`` once (and nothing without them)."""
        monitors = self.settings.nats_monitors
        try:
            line = await asyncio.wait_for(self.world.sync_warning(monitors), 5.0)
        except Exception as err:  # a diagnosis, never a reason to stop
            log.warning("cannot check the store's sync setting: %s", getattr(err, "message", err))
            return
        if line is not None:
            log.warning("%s", line)

    def consuming(self) -> bool:
        """Started, not stopping, not failed, and both consumers (flow and step) running: the
        half of a readiness probe that needs no round trip (``wayline.health``)."""
        if not self._started or self._stopping.is_set() or self.failure is not None:
            return False
        names = {t.get_name() for t in self._tasks if not t.done()}
        return {"wayline-flow-consumer", "wayline-step-consumer"} <= names

    async def run(self) -> None:
        """Consume until :meth:`close` is called (or the task is cancelled)."""
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self.close()
        if self.failure is not None:
            raise self.failure

    async def close(self, *, graceful: bool = True) -> None:
        """Stop the worker.

        Graceful: stop receiving; each delivery reaches its next checkpoint (the inline batch
        it is running settles and is recorded) and hands its run back, within the grace period.
        A delivery still busy when the grace runs out is cut off (handed back; the attempt of a
        body cut off counts), with a WARNING naming its run and the steps it was running.

        Forced (``graceful=False``): end this worker's generation now. Nothing it was doing is
        persisted, published or started from here on (its tasks are cancelled, and cancelled
        again each second while they run on: a cancel can be lost in a world call), except a
        compensation already running, which keeps its claim long enough to checkpoint. Held
        deliveries are released at once, so a replacement worker (in this process or another)
        continues from the last checkpoint; a body that was cut off runs again there.

        Either way, a body that cannot be cut off (a sync body in its thread) keeps its
        delivery held, and renewed, until the thread returns (or its fence's deadline ends the
        process): it is never run again, or compensated, beside itself.

        A graceful close that is cancelled (a caller bounding the shutdown, a second Ctrl-C)
        ends as a forced one before the cancel goes through: nothing of the worker runs on
        after ``close`` returns or raises."""
        try:
            await self._close(graceful)
        except asyncio.CancelledError:
            ending = asyncio.ensure_future(self._close(graceful=False))
            while not ending.done():
                try:
                    await asyncio.shield(ending)
                except asyncio.CancelledError:
                    continue  # the forced close ends first, then the cancel (a sync body
                    # in its thread holds it until the thread returns, or its fence's
                    # deadline ends the process, as any close)
            ending.result()
            raise

    async def _close(self, graceful: bool) -> None:
        self._stopping.set()
        self.handler.closing = True
        consumers = [t for t in self._tasks if t.get_name().endswith("-consumer")]
        for task in list(self._tasks):
            if task.get_name() != "wayline-renewer":
                task.cancel()
        if graceful:
            await self._hand_back_in_hand(consumers)
            await self._let_handlers_settle()
        else:
            protected = [t for t in self._handlers if t in self.handler.protected]
            for task in list(self._handlers):
                if task not in protected:
                    task.cancel()
            if protected:
                await asyncio.wait(protected, timeout=self.shutdown_grace_seconds)
                self._warn_outlived_grace(protected)
        holding = dict(self._held)
        held = [d for d, f in holding.values() if f.tripped is None]
        # what a close cancelled after taking stock had to hand back (its handlers, cut off,
        # left self._held since): handed back by this one
        held += [d for d in self._handing_back if all(d is not h for h in held)]
        self._handing_back = held
        await _cancel_until_ended(list(self._handlers))
        # A body that cannot be cut off (a sync body in its thread) runs on after its handler
        # was cancelled: its delivery stays held (renewed, under its fence's deadline, where
        # the process exits if it is still running) until the thread returns, so it is never
        # released, or redelivered, beside it.
        threads = {k: v for k, v in holding.items() if v[1].executing()}
        if threads:
            self._held.update(threads)
            while any(k in self._held and f.executing() for k, (_, f) in threads.items()):  # noqa: ASYNC110 - thread ends set no loop event
                await asyncio.sleep(0.02)
        held = self._handing_back = [d for d in held if id(d) not in threads or id(d) in self._held]
        self._closed = True
        self.handler.replays.clear()  # every handler has ended: no replay is in use
        for task in list(self._tasks):
            task.cancel()
        pending = list(self._handlers) + list(self._tasks)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        late, self._late = self._late, []
        self._handing_back = held + late
        await self._hand_back(self._handing_back)
        self._handing_back = []
        self._held.clear()

    async def _hand_back_in_hand(self, consumers: list[asyncio.Task[Any]]) -> None:
        """Hand back at once what the receive loops had in hand as the close came (messages
        waiting for a slot, or received as the stop came), not after the handlers settle: a
        drive that takes the grace to reach its checkpoint would keep them, unrenewed, from
        every other worker until the close ends or their visibility runs out (an attempt
        spent). The loops end at their cancel; one whose cancel a world call lost ends with
        that call, and what it brings is handed back at the close's end, as before. A forced
        close cancels the handlers first and hands these back at its end, at once too."""
        if consumers:
            await asyncio.wait(consumers, timeout=_IN_HAND_SECONDS)
        late, self._late = self._late, []
        try:
            await self._hand_back(late)
        except BaseException:  # a close cancelled meanwhile: the forced one hands them back
            self._late.extend(late)
            raise

    async def _let_handlers_settle(self) -> None:
        """A graceful close: wait, within the grace, for the handlers to reach their next
        checkpoint, and meanwhile withdraw this worker from the registry. The withdrawal is a
        world write (on NATS a read per served route, each up to a request timeout): a store
        that does not answer must not stretch the close past its grace, where a pod is killed
        mid-step, so it runs alongside the handlers and is cut off with them."""
        grace = self.shutdown_grace_seconds
        withdrawing = asyncio.ensure_future(self._withdraw())
        try:
            await asyncio.wait([*self._handlers, withdrawing], timeout=grace)
            if self._handlers:
                self._warn_outlived_grace(self._handlers)
            if not withdrawing.done():
                log.warning(
                    "could not withdraw this worker from the registry within the shutdown "
                    "grace (%gs): it counts as serving its workflows until its last heartbeat "
                    "lapses",
                    grace,
                )
        finally:
            await _cancel_until_ended([withdrawing])

    def _warn_outlived_grace(self, handlers: Iterable[asyncio.Task[Any]]) -> None:
        """One warning per delivery whose handler is still busy when the shutdown grace ran
        out (it is cut off next), naming its run and the steps it runs: a rolling update whose
        grace is shorter than a step must not look like a clean stop."""
        busy = {t for t in handlers if not t.done()}
        for delivery, fence in list(self._held.values()):
            if fence.handler not in busy:
                continue
            payload = delivery.payload or {}
            steps = list(dict.fromkeys(fence.steps))
            if not steps and payload.get("stepName"):
                steps = [str(payload["stepName"])]
            what = ", ".join(repr(s) for s in steps) if steps else "no step body"
            grace = f"the shutdown grace ({self.shutdown_grace_seconds:g}s) ran out"
            if fence.threads and fence.executing():
                log.warning(
                    "%s with run %s still running (step %s, a sync body, which cannot be cut "
                    "off): its delivery %s stays held until the thread returns, then is handed "
                    "back",
                    grace,
                    payload.get("runId"),
                    what,
                    delivery.message_id,
                )
            else:
                log.warning(
                    "%s with run %s still running (step %s): cut off, its delivery %s is "
                    "handed back and the step runs again elsewhere if it has retries left (the "
                    "cut-off attempt counts); a grace above the longest step avoids this",
                    grace,
                    payload.get("runId"),
                    what,
                    delivery.message_id,
                )

    async def recover_runs(self) -> dict[str, int]:
        """Re-arm the non-terminal runs that have no wake coming (recovery is automatic,
        never a manual call).

        A run that some stored message names (queued, delayed or in flight) is left to that
        message, unless a replay divergence blocks it: only a worker with its code lifts that
        block, and the message may be a hook's timeout or a sleep hours off, so the run is
        woken now. That is one more wake, which only replays the run: the timer's own wake is
        re-sent under its key, which the world holds while it is stored, so it is not doubled
        and still fires at its time. A child whose parent is alive is left to its parent,
        which re-arms it (seed 004: a child is never driven behind its parent's back), unless
        a divergence blocks it: its parent, waiting on it, is idle and would never wake it,
        and a wake only replays the child (its log keeps each step body to one run). A child
        whose parent vanished is an orphan, re-armed and counted. An idle run (see
        ``_classify``) is left alone.
        Returns ``{running, waiting, compensating, orphans, total, rearmed}``: the runs found
        by kind, and how many got a new wake."""
        counts = {
            "running": 0,
            "waiting": 0,
            "compensating": 0,
            "orphans": 0,
            "total": 0,
            "rearmed": 0,
        }
        woken = await self.world.runs_with_messages()
        statuses = (
            RunStatus.PENDING,
            RunStatus.RUNNING,
            RunStatus.BLOCKED,
            RunStatus.COMPENSATING,
            RunStatus.COMPENSATION_STUCK,
        )
        for status in statuses:
            for info in await self.world.list_runs(status=status, limit=100_000):
                if self.workflows and info.workflow not in self.workflows:
                    continue
                parent = info.attributes.get("parent")
                if isinstance(parent, dict):
                    try:
                        owner = await self.world.get_run(str(parent.get("runId")))
                    except CorruptEntryError:
                        continue  # its parent is fenced: the parent re-arms it once repaired
                    live = owner is not None and not owner.status.terminal
                    if live and not divergence.held(info):
                        continue
                    if owner is None:
                        counts["orphans"] += 1
                        log.warning(
                            "run %s is an orphan: its parent %s is gone; recovering it",
                            info.run_id,
                            parent.get("runId"),
                        )
                try:
                    kind, idle = await self._classify(info.run_id, status)
                except CorruptEntryError as err:
                    log.error("not recovering run %s: %s", info.run_id, err)
                    continue
                counts[kind] += 1
                counts["total"] += 1
                if idle:
                    continue  # nothing to do until someone acts
                if woken is not None and info.run_id in woken and not divergence.held(info):
                    continue  # its wake is coming
                counts["rearmed"] += 1
                await send(
                    self.world,
                    FLOW_TOPIC,
                    Wake(info.run_id, WakeReason.RECOVER).to_wire(),
                    idempotency_key=f"{info.run_id}:recover",
                )
        return counts

    async def _classify(self, run_id: str, status: RunStatus) -> tuple[str, bool]:
        """The run's kind for the counts, and whether it is idle: waiting only for a person
        or for something outside that brings its own wake (a hook without a timeout, a live
        child, a stuck unwind), with nothing from outside in the log since (a payload, a
        child's end, a cancel request), so a wake now would only replay it."""
        events = await self.world.list_events(run_id)
        view = fold(run_id, events)
        settled = bool(events) and not view.last_is_input
        if status is RunStatus.COMPENSATION_STUCK:
            return "compensating", settled
        if status is RunStatus.COMPENSATING:
            return "compensating", False
        kinds = view.open_kinds()
        if kinds and kinds <= {"hook", "child", "timer"}:
            idle = settled and "timer" not in kinds and status is not RunStatus.BLOCKED
            return "waiting", idle
        return "running", False

    # --- consuming -----------------------------------------------------------------------------
    async def _consume(self, topic: str, slots: Slots, cap: int, wait: float) -> None:
        """Receive from ``topic`` while a slot is free, taking slots only for the messages a
        receive brings (``_engine.delivery_slots``): a long poll that finds nothing holds no
        slot, so another topic's due message never waits for it. One receive asks for at
        most ``cap`` messages, so one busy route does not take every slot of its kind, and
        waits up to ``wait`` seconds (``_poll_seconds``)."""
        backoff = 0.1
        while not self._stopping.is_set():
            await slots.until_free()
            try:
                deliveries = await self.world.receive(
                    topic, max_messages=min(cap, max(1, slots.free())), wait_seconds=wait
                )
                backoff = 0.1
            except WaylineError as err:
                # unavailable, or a store changed under the world (its queue stream deleted
                # by hand until something creates it again): a receive loop that ended here
                # would leave this worker up and consuming nothing, so it retries, loudly
                what = "unavailable" if isinstance(err, WorldUnavailableError) else "failing"
                log.warning(
                    "world %s while receiving %s: %s (retry in %.1fs)", what, topic, err, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            if deliveries and self._stopping.is_set():
                # received as the stop came (the receive lost its cancel): the close took
                # stock already, so a handler spawned now would outlive it. Left to the close
                # to hand back once this consumer ended: a release awaited here could be cut
                # short by the close's second cancel, holding the message until visibility
                self._late.extend(deliveries)
                return
            ready = slots.take_now(len(deliveries))
            for delivery in deliveries[:ready]:
                self._begin(topic, delivery, slots)
            if ready < len(deliveries):
                await self._wait_for_slots(topic, deliveries[ready:], slots)

    async def _wait_for_slots(self, topic: str, waiting: list[Delivery], slots: Slots) -> None:
        """Messages another loop's receive left without a slot: each waits in hand for one,
        in order, for at most ``_IN_HAND_SECONDS`` and never past a third of the visibility
        from when the world began its hold (when the renewer would renew it). One whose wait
        runs out is handed back with the rest, undone and at once (a hand-back spends no
        attempt): another worker may take them, and none waits out a visibility. A close
        cancels the wait, and the close hands them back."""
        for i, delivery in enumerate(waiting):
            held_for = time.monotonic() - delivery.held_since
            left = min(_IN_HAND_SECONDS, self.world.visibility_seconds / 3 - held_for)
            try:
                await asyncio.wait_for(slots.take(), max(0.0, left))
            except TimeoutError:
                try:
                    await self._hand_back(waiting[i:])
                except BaseException:  # a close: it hands back again what is still held
                    self._late.extend(waiting[i:])
                    raise
                return
            except BaseException:
                self._late.extend(waiting[i:])
                raise
            if self._stopping.is_set():
                slots.release()
                self._late.extend(waiting[i:])
                return
            self._begin(topic, delivery, slots)

    def _begin(self, topic: str, delivery: Delivery, slots: Slots) -> None:
        """Handle ``delivery``, which holds one of ``slots`` (released by its handler)."""
        # timed from the world's hold, which may have begun well before this (a NATS pull
        # answered late): the deadline must come before its redelivery
        fence = Fence(
            self.settings.max_invocation_seconds,
            self.settings.handoff_after,
            received=delivery.held_since,
            renewed=delivery.held_since,
        )
        self._held[id(delivery)] = (delivery, fence)
        fence.handler = spawn(
            self._handle(delivery, fence, slots),
            f"wayline-{topic}-{delivery.message_id}",
            self._handlers,
        )

    async def _hand_back(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:  # released, not acked: redelivered now with the same id
            try:
                await self.world.release(delivery)
            except WaylineError as err:
                log.warning("could not release delivery %s: %s", delivery.message_id, err)

    def _spare_slot(self, delivery: Delivery) -> bool:
        """Whether, of the slots ``delivery`` holds one of (flow or step), one is held by no
        delivery: a delivery that waits in process for a short sleep (``prompt_wakes``) keeps
        its slot only then, so others' messages still have one."""
        slots = self._slots_of.get(id(delivery))
        busy = None if slots is None else self._busy.get(slots)
        return busy is not None and busy[0] < busy[1]

    async def _handle(self, delivery: Delivery, fence: Fence, slots: Slots) -> None:
        busy = self._busy.get(slots)
        if busy is not None:
            busy[0] += 1
            self._slots_of[id(delivery)] = slots
        hold(fence)  # every body the handler runs is cut off when the fence trips
        # A write that fails for a moment (a stream electing a leader) is asked again until
        # the handler's deadline, not lost with its attempt (a step's completion rides on it).
        patience.hold_until(lambda: self._deadline(fence))
        if delivery.due_at is not None:
            metrics.QUEUE_LAG_SECONDS.labels(delivery.topic).observe(
                max(0.0, time.time() - delivery.due_at)
            )
        try:
            payload = delivery.payload or {}
            try:
                with (
                    telemetry.attached(payload),
                    ordering.attached(ordering.of_payload(payload)),
                    logs.bound(run_id=payload.get("runId"), step=payload.get("stepName")),
                ):
                    verdict = await self._drive(delivery, fence)
            except CorruptEntryError as err:
                # the same bytes fail the same way on every delivery: set it aside, do not
                # crash-loop (the run stays fenced until `wayline runs repair`)
                verdict = Verdict("dead", reason=str(err))
            except WaylineError as err:
                log.warning(
                    "delivery %s of %s failed: %s (will be redelivered)",
                    delivery.message_id,
                    delivery.topic,
                    err,
                )
                verdict = Verdict("retry", delay=min(30.0, 0.5 * delivery.attempt))
            except Exception:
                log.exception(
                    "delivery %s of %s crashed (will be redelivered)",
                    delivery.message_id,
                    delivery.topic,
                )
                verdict = Verdict("retry", delay=min(30.0, 0.5 * delivery.attempt))
            if self._held.pop(id(delivery), None) is None:
                metrics.DELIVERIES.labels(delivery.topic, "abandoned").inc()
                return  # given up at its fence's deadline: its message belongs to others now
            metrics.DELIVERIES.labels(delivery.topic, verdict.kind).inc()
            await self._settle(delivery, verdict)
        finally:
            if busy is not None:
                busy[0] -= 1
                self._slots_of.pop(id(delivery), None)
            self._held.pop(id(delivery), None)
            slots.release()

    async def _drive(self, delivery: Delivery, fence: Fence) -> Verdict:
        """Handle the delivery; while the store is full (``STORE_FULL``), handle it again
        here, backing off from 0.5 s to 5 s, still held (renewed) by this worker. Each
        redelivery would count against the run's delivery budget
        (``WORKFLOW_MAX_QUEUE_DELIVERIES``), so a store full for some minutes would fail every
        run it held once space was freed (``MAX_DELIVERIES_EXCEEDED``); a full store says
        nothing about the run. The worker stops trying here when it closes or when the fence
        trips (a renewal that keeps failing, the delivery's bound): the error is then raised
        and the delivery retried as before."""
        backoff = 0.5
        while True:
            try:
                if delivery.topic == FLOW_TOPIC:
                    return await self.handler.handle_flow(delivery)
                return await self.handler.handle_step(delivery)
            except WorldStorageFullError as err:
                if self._stopping.is_set() or self.handler.closing or fence.tripped is not None:
                    raise
                log.warning(
                    "delivery %s of %s: %s (tried again in %.1fs, still held)",
                    delivery.message_id,
                    delivery.topic,
                    err,
                    backoff,
                )
            await wait_set(self._stopping, backoff)
            backoff = min(5.0, backoff * 2)

    async def _settle(self, delivery: Delivery, verdict: Verdict) -> None:
        """Settle the delivery as ``verdict`` says. A store that cannot take the settlement
        now (unavailable, or full: ``STORE_FULL``) is asked again, backing off, for up to half
        the visibility window, while this worker runs: left unsettled, the message would
        stay held by this worker until its visibility lapsed (30 s by default), so runs would
        wait that long after the store came back. A settlement that lands after the message
        was delivered elsewhere changes nothing (the world refuses it as stale)."""
        deadline = time.monotonic() + self.world.visibility_seconds / 2
        backoff = 0.1
        while True:
            try:
                await self._settle_once(delivery, verdict)
                return
            except WorldUnavailableError as err:
                if self._stopping.is_set() or time.monotonic() + backoff > deadline:
                    log.warning(
                        "could not settle delivery %s: %s (it will be redelivered)",
                        delivery.message_id,
                        err,
                    )
                    return
                log.warning(
                    "could not settle delivery %s yet: %s (retry in %.1fs)",
                    delivery.message_id,
                    err,
                    backoff,
                )
            except WaylineError as err:
                log.warning(
                    "could not settle delivery %s: %s (it will be redelivered)",
                    delivery.message_id,
                    err,
                )
                return
            await asyncio.sleep(backoff)
            backoff = min(2.0, backoff * 2)

    async def _settle_once(self, delivery: Delivery, verdict: Verdict) -> None:
        await settle(self.world, delivery, verdict, closing=self.handler.closing)

    async def _heartbeat(self) -> None:
        """Record in the world what this worker serves, alive for three heartbeats."""
        if not self.workflows:
            return
        entries = served_entries(
            self.workflows.values(),
            self.queue,
            self.worker_id,
            3 * self.heartbeat_seconds,
            self.world.now(),
            self.settings.worker_version,
            self.draining,
            # the deliveries under way now: the operator removes the pods holding the fewest
            # first when it scales a version down (docs/operator.md)
            len(self._held),
        )
        try:
            await self.world.record_served(entries)
        except WaylineError as err:
            log.warning("could not record this worker's heartbeat: %s", err)

    async def _withdraw(self) -> None:
        """A graceful close: this worker consumes nothing more, so it no longer counts as
        serving its workflows (not for three more heartbeats): its registry entries say so now
        (another worker of the same definitions still counts; ``registry.merge_served``)."""
        if not self.workflows or not self._started:
            return
        beats = [t for t in self._tasks if t.get_name() == "wayline-heartbeat"]
        if beats:  # cancelled above: let a heartbeat under way land first, not after
            await asyncio.gather(*beats, return_exceptions=True)
        # A failed write is tried again: one request that timed out on a loaded server left
        # the entries live for three heartbeats (30 s by default), and the runs this worker
        # served said nothing of the worker they wait for. The tries are few, and the grace
        # cuts them off as it cuts off the first (``_let_handlers_settle``).
        for pause in (*_WITHDRAW_PAUSES, None):
            entries = withdrawn_entries(
                self.workflows.values(), self.queue, self.worker_id, self.world.now()
            )
            try:
                await self.world.record_served(entries)
                return
            except WaylineError as err:
                if pause is None:
                    log.warning("could not withdraw this worker from the registry: %s", err)
                    return
                log.info("withdrawing this worker from the registry failed, trying again: %s", err)
            await asyncio.sleep(pause)

    async def _heartbeat_loop(self) -> None:
        # Ends on the stop flag too, not only on its cancel: a cancel that lands as a world
        # call completes can be lost (``asyncio.wait_for`` before Python 3.12, inside the NATS
        # client), and a loop that outlived it kept ``close`` waiting for it for good.
        while not self._stopping.is_set():
            await asyncio.sleep(self.heartbeat_seconds)
            if not self._stopping.is_set():
                await self._heartbeat()

    async def _rearm_loop(self) -> None:
        """Re-arm the runs of this worker's workflows whose start was lost between its two
        writes (``_engine.lost_starts``). Each pause is 1 to 1.25 periods, so that two looks are
        at least a period apart and workers started together do not keep looking at once
        (they would only dedupe). Ends on the stop flag too (``_heartbeat_loop``)."""
        passes = LostStarts(self.world, self.workflows.keys())
        period = self.settings.start_rearm_seconds
        while not self._stopping.is_set():
            await asyncio.sleep(period * random.uniform(1.0, 1.25))
            if self._stopping.is_set():
                break
            try:
                await passes.sweep()
            except WaylineError as err:
                log.warning("could not look for runs whose start was lost: %s", err)

    def _deadline(self, fence: Fence) -> float:
        """When a delivery is given up (``time.monotonic``): its holder provably holds it
        until one visibility after its last renewal; a sixth of that is left for the last
        thing under way to end before it could be redelivered. A refused renewal does not
        bring it forward (``_renew``): it ends the bodies, not the writes of what they did."""
        visibility = self.world.visibility_seconds
        return fence.renewed + visibility - visibility / 6

    async def _renew_loop(self) -> None:
        """Renew held deliveries; trip a fence at its bound or when renewals keep failing;
        give a tripped delivery up at its deadline (just before it could be redelivered),
        exiting the process if a body that could not be cut off is still running.

        Each look only reads the clock and the fences, and the renewals it finds due run
        beside it, each bounded: a renewal the world leaves unanswered (a consumer electing
        its leader answers none for seconds) holds back neither the other deliveries'
        renewals nor the give-up of a tripped one. The looks come every thirtieth of the
        visibility, well within the sixth left between a deadline and the delivery's return."""
        visibility = self.world.visibility_seconds
        period = max(0.05, visibility / 3)
        pause = max(0.02, visibility / 30)
        renewals: set[asyncio.Task[Any]] = set()
        renewing: dict[int, asyncio.Task[Any]] = {}
        try:
            while not self._closed:  # the flag as well as the cancel (``_heartbeat_loop``)
                await asyncio.sleep(pause)
                now = time.monotonic()
                for key, (delivery, fence) in list(self._held.items()):
                    if fence.tripped is None:
                        self._trip_if_over(delivery, fence, now, period)
                    if fence.tripped is not None:
                        if now >= self._deadline(fence):
                            self._give_up(key, delivery, fence)
                        continue
                    busy = renewing.get(key)
                    if (busy is None or busy.done()) and now - fence.renewed >= period * 0.9:
                        # An unanswered renewal is asked again at the next look: waiting
                        # the usual period would leave it one more try before its fence
                        # trips at one and a half periods without a renewal.
                        renewing[key] = spawn(
                            self._renew(key, delivery, fence, period / 4),
                            f"wayline-renew-{delivery.message_id}",
                            renewals,
                        )
                for key in [k for k, t in renewing.items() if t.done()]:
                    del renewing[key]
        finally:
            for task in list(renewals):
                task.cancel()
            await asyncio.gather(*renewals, return_exceptions=True)

    def _trip_if_over(self, delivery: Delivery, fence: Fence, now: float, period: float) -> None:
        """Trip ``fence`` past its bound, or when renewals have failed for too long."""
        elapsed = fence.elapsed()
        if elapsed > fence.bound:
            fence.trip(
                f"delivery {delivery.message_id} held {elapsed:.1f}s, past its bound "
                f"of {fence.bound:g}s (WAYLINE_MAX_INVOCATION_SECONDS, or the "
                "step's timeout=)"
            )
        elif now - fence.renewed > 1.5 * period:
            fence.trip(
                f"delivery {delivery.message_id} not renewed for "
                f"{now - fence.renewed:.1f}s (visibility {self.world.visibility_seconds:g}s)"
            )
        if fence.tripped is not None:
            log.error("fenced: %s; its bodies are cut off", fence.tripped)

    async def _renew(self, key: int, delivery: Delivery, fence: Fence, timeout: float) -> None:
        """Renew one held delivery, waiting at most ``timeout`` for the world's answer. A
        refused renewal ends its hold at once (``_deadline``)."""
        sent = time.monotonic()
        try:
            renewed = await asyncio.wait_for(self.world.renew(delivery), timeout)
        except (WaylineError, TimeoutError) as err:
            log.warning(
                "could not renew delivery %s: %s",
                delivery.message_id,
                err if isinstance(err, WaylineError) else f"no answer within {timeout:g}s",
            )
            return
        held = self._held.get(key)
        if held is None or held[1] is not fence:
            return  # settled or given up meanwhile: the answer changes nothing
        if renewed:
            if fence.tripped is None:  # a tripped fence's deadline is not put off
                fence.renewed = max(fence.renewed, sent)
            return
        # Refused (even after the fence tripped meanwhile): the delivery may be redelivered
        # already (on NATS every renewal is refused after the connection was lost, the server
        # may have crashed), so no body runs on under it: the trip cancels the async ones, and a
        # sync body, which no cancel reaches, ends with the process at once. The delivery
        # stays held until its deadline all the same: what its bodies did before is still
        # recorded, its appends asked again through a leader election (``patience``). The log
        # takes each append at its expected sequence only, so a redelivery that wrote first
        # makes them conflict, never doubles them; given up at once, a completion the election
        # held back was lost, and the step ran again after the visibility window.
        _stale(delivery, "renewal")
        fence.lose(
            f"delivery {delivery.message_id} may no longer be this worker's (its renewal was "
            "refused)"
        )
        if any(not done.is_set() for done in fence.threads):
            self._give_up(key, delivery, fence)

    def _give_up(self, key: int, delivery: Delivery, fence: Fence) -> None:
        """The tripped delivery's deadline has come (or its renewal was refused with a sync body
        running): it is left to its redelivery, and its handler cancelled. A body still running
        makes the process exit."""
        self._held.pop(key, None)
        exit_if_executing(
            fence, f"delivery {delivery.message_id}: {fence.tripped}", "its redelivery"
        )
        log.error("delivery %s given up; it is redelivered", delivery.message_id)
        if fence.handler is not None:
            fence.handler.cancel()


def check_bounds(settings: Settings, visibility: float) -> None:
    """Refuse settings under which a redelivery could run beside its previous holder, or an
    expired lease would not prove the owning invocation stopped (see ``_engine.fencing``)."""
    bound, lease = settings.max_invocation_seconds, settings.lease_seconds
    handoff = settings.handoff_after
    if bound <= 0:
        raise ConfigurationError(f"WAYLINE_MAX_INVOCATION_SECONDS must be > 0, got {bound:g}")
    if not 0 < handoff < bound:
        raise ConfigurationError(
            f"WAYLINE_HANDOFF_SECONDS ({handoff:g}) must be above 0 and below "
            f"WAYLINE_MAX_INVOCATION_SECONDS ({bound:g}): a run hands off at a step boundary "
            "before the bound cuts its bodies off"
        )
    if settings.inline_ownership and bound + visibility >= lease:
        raise ConfigurationError(
            f"WAYLINE_MAX_INVOCATION_SECONDS ({bound:g}) + the world's visibility timeout "
            f"({visibility:g}) = {bound + visibility:g}s must be below "
            f"WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS ({lease:g}): a fenced holder may still "
            "execute for up to one visibility window past the bound, and an expired lease must "
            "prove the owning invocation stopped"
        )


def _stale(delivery: Delivery, what: str) -> None:
    log.warning(
        "%s of delivery %s (attempt %d) of %s was a no-op: the delivery is no longer this "
        "worker's (redelivered, or already settled); its message is left to its holder",
        what,
        delivery.message_id,
        delivery.attempt,
        delivery.topic,
    )


_RECANCEL_SECONDS = 1.0
"""How long a cancelled handler may take to end before it is cancelled again. Its cancel may
have been lost (one that lands as a world call completes, ``asyncio.wait_for`` before Python
3.12 in the NATS client): the handler then went on driving the run, into a step body the
close would have waited out. A handler that got its cancel ends in milliseconds (it cancels
its bodies and waits for them), so a second cancel within a second only meets a lost one."""


async def _cancel_until_ended(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them, cancelling again any still running a second on."""
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=_RECANCEL_SECONDS)
    for task in tasks:  # retrieved here, as a gather would: they are the handlers' to log
        if not task.cancelled():
            task.exception()


async def settle(queue: WorkQueue, delivery: Delivery, verdict: Verdict, *, closing: bool) -> None:
    """Settle ``delivery`` on the queue as ``verdict`` says; a retry with no delay asked while
    the worker is ``closing`` is a hand-back, not an attempt."""
    if verdict.kind == "ack":
        done = await queue.ack(delivery)
    elif verdict.kind == "retry" and verdict.delay == 0 and closing:
        done = await queue.release(delivery)
    elif verdict.kind == "retry":
        done = await queue.retry(delivery, verdict.delay)
    elif verdict.kind == "dead":
        log.error(
            "set aside %s message %s: %s",
            delivery.topic,
            delivery.message_id,
            verdict.reason,
        )
        done = await queue.dead_letter(delivery, verdict.reason)
    else:
        return
    if not done:
        _stale(delivery, verdict.kind)
