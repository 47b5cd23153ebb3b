"""One delivery's hold on one run: what the parts of an invocation share.

The flow loop (``handler``), the saga unwind (``unwind``) and the children (``children``) all
work on the same live replay under the same message. :class:`RunSession` is that, with the
few writes they all make as public methods: feed the replay what was appended (or catch up
from the log), append run inputs, send queue messages, write provisional events, and run one
step body inline (owned recovery or a lazy new step).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from typing import Any

from .._core import clock
from .._core.dispatch import step_dispatch_key
from .._core.events import Event, EventType, NewEvent
from .._core.ids import MessageId
from .._core.planning import Arrival, Send, owner_stamp, step_send
from .._core.replay import Replay, StepRecord
from ..errors import EntityConflictError, RunTerminalError
from ..settings import Settings
from ..world import Delivery, World
from ..world.sending import send
from . import fencing
from .deferred import InlineBatch, flush
from .ending import record_outcome
from .messages import Stats
from .step_runner import Failed, Outcome, Retry, run_step_body

log = logging.getLogger("wayline.runtime")

_SENDS_AT_ONCE = 64
"""Queue messages one replay enqueues at once (``RunSession.send``)."""


class RunSession:
    def __init__(
        self,
        world: World,
        settings: Settings,
        replay: Replay,
        delivery: Delivery,
        *,
        backstop: str | None,
        stats: Stats,
        protected: set[asyncio.Task[Any]],
        namespace: str | None = None,
        key_run: str | None = None,
    ) -> None:
        self.world = world
        self.settings = settings
        self.replay = replay
        self.run_id = replay.run_id
        self.delivery = delivery
        self.my_id = str(delivery.message_id)
        """The delivery's message id: what an inline start is stamped with."""
        self.backstop = backstop
        """The backstop key this delivery was sent under, if it is a backstop wake."""
        self.stats = stats
        self._protected = protected
        self.namespace = namespace
        """The namespace the run was started in (its ``run_created``), or None."""
        self.key_run = key_run
        """The run id its steps' idempotency keys are made of, when not its own (a fork's)."""
        self.hooks_looked = delivery.attempt <= 1
        """Whether the run's waiting hooks had their buffered payloads looked for: a
        redelivery looks once, as the delivery before it may have died between writing a
        hook and taking its payload (``buffered_hooks``)."""

    @property
    def arrival(self) -> Arrival:
        return Arrival(self.my_id, self.backstop, self.delivery.payload or {})

    # --- the replay and the log ----------------------------------------------------------------
    async def feed(self, events: list[Event]) -> None:
        """Feed what this session appended; catch up from the log when it is not contiguous."""
        replay = self.replay
        if (
            events
            and events[0].seq == replay.last_seq + 1
            and all(b.seq == a.seq + 1 for a, b in itertools.pairwise(events))
        ):
            replay.feed(events)
        else:
            await self.catch_up()

    async def catch_up(self) -> None:
        replay = self.replay
        replay.feed(await self.world.list_events(self.run_id, after_seq=replay.last_seq))

    async def flush(self) -> None:
        """Write the replay's provisional events, if any (see ``deferred``)."""
        await flush(self.world, self.replay)

    async def append_inputs(self, events: list[NewEvent]) -> bool:
        """Append events that may have been written already (wait completions); False when
        the run has ended."""
        try:
            appended = await self.world.append(self.run_id, events)
        except RunTerminalError:
            return False
        except EntityConflictError:
            for event in events:  # one of them was already written; write the rest one by one
                try:
                    await self.world.append(self.run_id, [event])
                except EntityConflictError:
                    pass
                except RunTerminalError:
                    return False
            await self.catch_up()
            return True
        await self.feed(appended)
        return True

    async def send(self, sends: Iterable[Send]) -> list[MessageId]:
        """Enqueue ``sends``, up to ``_SENDS_AT_ONCE`` at a time: every replay re-sends each
        open queued step's message under its key (deduped by the world), so a wide ``gather``
        re-sent hundreds, one round trip (or one SQLite commit) after the other. Returns
        the id of each message, in the order of ``sends``."""
        pending = list(sends)
        ids: list[MessageId] = []
        for i in range(0, len(pending), _SENDS_AT_ONCE):
            calls = [
                send(self.world, s.topic, s.payload, idempotency_key=s.key, delay_seconds=s.delay)
                for s in pending[i : i + _SENDS_AT_ONCE]
            ]
            if len(calls) == 1:
                ids.append(await calls[0])
            else:
                ids += await asyncio.gather(*calls)
        return ids

    async def record(self, cid: str, outcome: Outcome, name: str = "") -> list[Event]:
        return await record_outcome(self.world, self.run_id, cid, outcome, name)

    # --- one step body, inline -----------------------------------------------------------------
    async def run_inline(
        self, rec: StepRecord, attempt: int, recovery: bool, group: InlineBatch
    ) -> list[Event]:
        """Run one step body here: a lazy new step, or owned recovery (re-stamped first).
        Returns the events written; a deferred completion is left in ``group``."""
        stats = self.stats
        stats.inflight_owned.add(rec.cid)
        counted = False
        try:
            events: list[Event] = []
            if recovery:
                assert rec.definition is not None
                if attempt > rec.definition.max_retries + 1:
                    return await self.record(rec.cid, _attempts_spent(rec, attempt))
                started = await self._restamp(rec, attempt)
                if started is None:
                    return events
                events += started
            executed, outcome = await self._run_body(rec, attempt, recovery)
            counted = True
            eligible = not recovery and rec.compensates is None
            if group.finished(rec.cid, outcome if executed else None, eligible=eligible):
                return events  # written with the next batch (see ``deferred``)
            if not executed or outcome is None:
                return events
            group.writing += 1
            try:
                events += await self.record(rec.cid, outcome, rec.name)
            finally:
                group.writing -= 1
            if isinstance(outcome, Retry):
                # The retry handoff: from now on the step is queue-owned (step_retrying lapsed
                # ownership for good) and its message is keyed by the step, never the backstop.
                delay = max(0.0, outcome.retry_after - clock.now())
                await self.send([step_send(self.run_id, rec, delay=delay)])
            return events
        finally:
            if not counted:
                group.finished(rec.cid, None, eligible=False)
            stats.inflight_owned.discard(rec.cid)

    async def _restamp(self, rec: StepRecord, attempt: int) -> list[Event] | None:
        """Owned recovery re-stamps its start: an unstamped one would read as unowned to a
        later wake, which would requeue the step the owner is re-running. None when the step
        or the run moved on meanwhile."""
        stamp = owner_stamp(attempt, self.my_id, self.settings.lease_seconds)
        try:
            return await self.world.append(
                self.run_id, [NewEvent(EventType.STEP_STARTED, rec.cid, stamp)]
            )
        except (EntityConflictError, RunTerminalError):
            return None

    async def _run_body(
        self, rec: StepRecord, attempt: int, recovery: bool
    ) -> tuple[bool, Outcome | None]:
        definition = rec.definition
        assert definition is not None

        async def body() -> Outcome:
            if rec.compensates is not None:
                task = asyncio.current_task()
                if task is not None:  # a forced close lets a compensation checkpoint
                    self._protected.add(task)
                    task.add_done_callback(self._protected.discard)
            return await run_step_body(
                definition,
                run_id=self.run_id,
                step_id=rec.cid,
                stored_input=rec.input,
                attempt=attempt,
                occurrence=rec.occurrence,
                forward_result=rec.result if rec.compensates else None,
                owner=self.my_id,
                recovery=recovery,
                world=self.world,
                key_run=self.key_run,
            )

        if recovery or self.settings.inline_ownership:
            key = step_dispatch_key(self.run_id, rec.cid)
            executed, outcome = await self.world.single_flight.run(
                key, body, fencing.running_loop()
            )
            return executed, outcome
        # Kill switch: the pre-ownership behaviour, where a fresh inline body took no
        # in-process claim (seed 000's #2780 repro fires twice in this mode).
        return True, await body()


def _attempts_spent(rec: StepRecord, attempt: int) -> Failed:
    return Failed(
        {
            "name": "FatalError",
            "code": "MAX_ATTEMPTS_EXCEEDED",
            "message": f"step {rec.name!r} did not finish in {attempt - 1} "
            f"attempt{'' if attempt == 2 else 's'} (its invocations died)",
        }
    )
