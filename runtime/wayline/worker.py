"""``wayline.Worker``: consumes the flow and step topics of a world and executes them.

Deliveries are held (renewed every third of the visibility period) while their handler runs
and settled only after it returns, which is after every inline body it started has settled.
A delivery held past ``max_invocation_seconds`` is abandoned (no more renewals) so the
lease, which must be longer, proves its owner dead (issue: kill bound).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from . import logs, metrics, telemetry
from .definitions import WorkflowDefinition
from .errors import ConfigurationError, WaylineError, WorldUnavailableError
from .events import EventType, RunStatus
from .handler import Handler
from .messages import Verdict
from .settings import Settings
from .tasks import spawn
from .world import FLOW_TOPIC, STEP_TOPIC, Delivery, World

log = logging.getLogger("wayline.worker")

_OPENS = {
    EventType.STEP_CREATED: "work",
    EventType.HOOK_CREATED: "hook",
    EventType.WAIT_CREATED: "timer",
    EventType.CHILD_CREATED: "child",
}
_INPUTS = frozenset(
    {
        EventType.RUN_CREATED,
        EventType.HOOK_RECEIVED,
        EventType.CHILD_COMPLETED,
        EventType.RUN_CANCEL_REQUESTED,
        EventType.RUN_COMPENSATION_RESUMED,
        EventType.RUN_COMPENSATION_ABANDONED,
    }
)
"""Events written from outside the run's own deliveries: after one, the run has work."""
_CLOSES = frozenset(
    {
        EventType.STEP_COMPLETED,
        EventType.STEP_FAILED,
        EventType.CHILD_COMPLETED,
        EventType.WAIT_COMPLETED,
        EventType.HOOK_DISPOSED,
    }
)


class Worker:
    def __init__(
        self,
        world: World,
        workflows: Iterable[WorkflowDefinition] = (),
        *,
        flow_concurrency: int = 64,
        step_concurrency: int = 64,
        settings: Settings | None = None,
        recover: bool = True,
        exit_on_invocation_deadline: bool = False,
        shutdown_grace_seconds: float = 30.0,
    ) -> None:
        self.world = world
        self.settings = settings or Settings.from_env()
        self.workflows = {w.name: w for w in workflows}
        if self.settings.inline_ownership and (
            self.settings.max_invocation_seconds >= self.settings.lease_seconds
        ):
            raise ConfigurationError(
                f"WAYLINE_MAX_INVOCATION_SECONDS ({self.settings.max_invocation_seconds:g}) must "
                f"be below WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS "
                f"({self.settings.lease_seconds:g}): an expired lease must prove the owning "
                "invocation dead, so no invocation may outlive it"
            )
        self.handler = Handler(world, self.workflows, self.settings)
        self.flow_concurrency = flow_concurrency
        self.step_concurrency = step_concurrency
        self.recover = recover
        self.exit_on_invocation_deadline = exit_on_invocation_deadline
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self._tasks: set[asyncio.Task[Any]] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._held: dict[int, tuple[Delivery, float]] = {}
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
        await self.world.start()
        if self.recover:
            await self.recover_runs()
        spawn(
            self._consume(FLOW_TOPIC, self.flow_concurrency), "wayline-flow-consumer", self._tasks
        )
        spawn(
            self._consume(STEP_TOPIC, self.step_concurrency), "wayline-step-consumer", self._tasks
        )
        spawn(self._renew_loop(), "wayline-renewer", self._tasks)

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

        Forced (``graceful=False``): end this worker's generation now. Nothing it was doing is
        persisted, published or started from here on (its tasks are cancelled), except a
        compensation already running, which keeps its claim long enough to checkpoint. Held
        deliveries are released at once, so a replacement worker (in this process or another)
        continues from the last checkpoint; a body that was cut off runs again there."""
        self._stopping.set()
        self.handler.closing = True
        for task in list(self._tasks):
            if task.get_name() != "wayline-renewer":
                task.cancel()
        if graceful:
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=self.shutdown_grace_seconds)
        else:
            protected = [t for t in self._handlers if t in self.handler.protected]
            for task in list(self._handlers):
                if task not in protected:
                    task.cancel()
            if protected:
                await asyncio.wait(protected, timeout=self.shutdown_grace_seconds)
        held = [d for d, _ in self._held.values()]
        for task in list(self._handlers) + list(self._tasks):
            task.cancel()
        pending = list(self._handlers) + list(self._tasks)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for delivery in held:  # released, not acked: redelivered now with the same id
            try:
                await self.world.retry(delivery, 0.0)
            except WaylineError as err:
                log.warning("could not release delivery %s: %s", delivery.message_id, err)
        self._held.clear()

    async def recover_runs(self) -> dict[str, int]:
        """Re-arm the non-terminal runs that have no wake coming (recovery is automatic,
        never a manual call).

        A run that some stored message names (queued, delayed or in flight) is left to that
        message. A child whose parent is alive is left to its parent, which re-arms it (seed
        004: a child is never driven behind its parent's back); a child whose parent vanished
        is an orphan, re-armed and counted. An idle run (see ``_classify``) is left alone.
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
                    owner = await self.world.get_run(str(parent.get("runId")))
                    if owner is not None and not owner.status.terminal:
                        continue
                    if owner is None:
                        counts["orphans"] += 1
                        log.warning(
                            "run %s is an orphan: its parent %s is gone; recovering it",
                            info.run_id,
                            parent.get("runId"),
                        )
                kind, idle = await self._classify(info.run_id, status)
                counts[kind] += 1
                counts["total"] += 1
                if idle or (woken is not None and info.run_id in woken):
                    continue  # nothing to do until someone acts, or its wake is coming
                counts["rearmed"] += 1
                await self.world.enqueue(
                    FLOW_TOPIC,
                    {"runId": info.run_id, "reason": "recover"},
                    idempotency_key=f"{info.run_id}:recover",
                )
        return counts

    async def _classify(self, run_id: str, status: RunStatus) -> tuple[str, bool]:
        """The run's kind for the counts, and whether it is idle: waiting only for a person
        or for something outside that brings its own wake (a hook without a timeout, a live
        child, a stuck unwind), with nothing from outside in the log since (a payload, a
        child's end, a cancel request), so a wake now would only replay it."""
        events = await self.world.list_events(run_id)
        settled = bool(events) and events[-1].type not in _INPUTS
        if status is RunStatus.COMPENSATION_STUCK:
            return "compensating", settled
        if status is RunStatus.COMPENSATING:
            return "compensating", False
        open_entities: dict[str, str] = {}
        for e in events:
            if e.correlation_id is None:
                continue
            if e.type in _OPENS:
                open_entities[e.correlation_id] = _OPENS[e.type]
            elif e.type in _CLOSES:
                open_entities.pop(e.correlation_id, None)
        kinds = set(open_entities.values())
        if kinds and kinds <= {"hook", "child", "timer"}:
            idle = settled and "timer" not in kinds and status is not RunStatus.BLOCKED
            return "waiting", idle
        return "running", False

    # --- consuming -----------------------------------------------------------------------------
    async def _consume(self, topic: str, concurrency: int) -> None:
        slots = asyncio.Semaphore(concurrency)
        backoff = 0.1
        while not self._stopping.is_set():
            await slots.acquire()
            free = 1
            while free < concurrency and not slots.locked() and slots._value > 0:
                await slots.acquire()
                free += 1
            try:
                deliveries = await self.world.receive(topic, max_messages=free, wait_seconds=0.5)
                backoff = 0.1
            except WorldUnavailableError as err:
                for _ in range(free):
                    slots.release()
                log.warning(
                    "world unavailable while receiving %s: %s (retry in %.1fs)", topic, err, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            except BaseException:
                for _ in range(free):
                    slots.release()
                raise
            for _ in range(free - len(deliveries)):
                slots.release()
            for delivery in deliveries:
                self._held[id(delivery)] = (delivery, time.monotonic())
                spawn(
                    self._handle(delivery, slots),
                    f"wayline-{topic}-{delivery.message_id}",
                    self._handlers,
                )

    async def _handle(self, delivery: Delivery, slots: asyncio.Semaphore) -> None:
        if delivery.due_at is not None:
            metrics.QUEUE_LAG_SECONDS.labels(delivery.topic).observe(
                max(0.0, time.time() - delivery.due_at)
            )
        try:
            payload = delivery.payload or {}
            try:
                with (
                    telemetry.attached(payload),
                    logs.bound(run_id=payload.get("runId"), step=payload.get("stepName")),
                ):
                    if delivery.topic == FLOW_TOPIC:
                        verdict = await self.handler.handle_flow(delivery)
                    else:
                        verdict = await self.handler.handle_step(delivery)
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
                return  # abandoned past the invocation bound: its message belongs to others now
            metrics.DELIVERIES.labels(delivery.topic, verdict.kind).inc()
            await self._settle(delivery, verdict)
        finally:
            self._held.pop(id(delivery), None)
            slots.release()

    async def _settle(self, delivery: Delivery, verdict: Verdict) -> None:
        try:
            if verdict.kind == "ack":
                await self.world.ack(delivery)
            elif verdict.kind == "retry":
                await self.world.retry(delivery, verdict.delay)
            elif verdict.kind == "dead":
                log.error(
                    "set aside %s message %s: %s",
                    delivery.topic,
                    delivery.message_id,
                    verdict.reason,
                )
                await self.world.dead_letter(delivery, verdict.reason)
        except WaylineError as err:
            log.warning(
                "could not settle delivery %s: %s (it will be redelivered)",
                delivery.message_id,
                err,
            )

    async def _renew_loop(self) -> None:
        period = max(0.05, self.world.visibility_seconds / 3)
        bound = self.settings.max_invocation_seconds
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for key, (delivery, since) in list(self._held.items()):
                if now - since > bound:
                    self._held.pop(key, None)
                    log.error(
                        "delivery %s exceeded WAYLINE_MAX_INVOCATION_SECONDS=%g: no longer "
                        "renewed, so it is redelivered and its lease can expire",
                        delivery.message_id,
                        bound,
                    )
                    if self.exit_on_invocation_deadline:
                        os._exit(70)
                    continue
                if now - since >= period * 0.9:
                    try:
                        await self.world.renew(delivery)
                    except WaylineError as err:
                        log.warning("could not renew delivery %s: %s", delivery.message_id, err)
