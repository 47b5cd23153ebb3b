"""Faults the seed chooses, injected at the world's edge: what the engine must survive.

Each seed draws a :class:`FaultPlan` (how likely each fault is, some seeds none at all), and
a :class:`FaultyWorld` consults it on every call, and gives every call a round trip's latency.
Every fault is one the World contract allows: an append or a token take refused (the store
did not answer) or slow, a message delivered late, a publish repeated (two messages with one
payload), an ack lost (the message comes back after its visibility timeout), a renewal of a
delivery or of a slot unanswered; and, in seeds with long declared steps (``long_steps.py``),
an outage of one process's renewals, each refused, lost or slow for a window of seconds.
"""

from __future__ import annotations

import asyncio
import random
import types
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._core import clock
from .._core.events import Event, EventType, NewEvent
from .._core.ids import MessageId
from ..errors import WorldUnavailableError
from ..world import Delivery, HookInfo, RunInfo
from ..worlds.memory import MemoryStore, MemoryWorld
from ..worlds.nats.skew import Skew
from .long_steps import Outage
from .loop import EPOCH
from .trace import Trace

#: How long a simulated receive waits for a message before it answers empty (virtual seconds).
IDLE_POLL_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class FaultPlan:
    refuse_append: float = 0.0
    slow_append: float = 0.0
    delay_message: float = 0.0
    repeat_publish: float = 0.0
    lose_ack: float = 0.0
    lose_renewal: float = 0.0
    crashes: int = 0
    """Worker processes crash-stopped during the run (each replaced by a fresh one)."""

    @classmethod
    def draw(cls, rng: random.Random) -> FaultPlan:
        """A quiet seed now and then (a fault-free run must pass too), else each fault with a
        probability of its own, up to a rate the engine meets in a bad hour."""
        if rng.random() < 0.15:
            return cls()

        def p(top: float) -> float:
            return rng.choice((0.0, rng.uniform(0.0, top)))

        return cls(
            refuse_append=p(0.1),
            slow_append=p(0.2),
            delay_message=p(0.2),
            repeat_publish=p(0.1),
            lose_ack=p(0.2),
            lose_renewal=p(0.2),
            crashes=rng.choice((0, 0, 1, 2)),
        )


class FaultyWorld(MemoryWorld):
    """A memory world whose calls fail as the plan says, and are traced."""

    def __init__(
        self,
        store: MemoryStore,
        plan: FaultPlan,
        rng: random.Random,
        trace: Trace,
        name: str,
        on_token: Callable[[str, str | None, float], None] | None = None,
        on_unpinned_start: Callable[[str], None] | None = None,
        skewed: bool = False,
        outage: Outage | None = None,
        **options: Any,
    ) -> None:
        super().__init__(store, **options)
        self.outage = outage
        """A window in which every renewal of this process fails (``long_steps.py``)."""
        self.plan, self.rng, self.trace, self.name = plan, rng, trace, name
        self.on_token = on_token
        """Told of every token the world hands out: the key, the holder, the world's time."""
        self.on_unpinned_start = on_unpinned_start
        """Told of every run this world's process began that no definition pinned before."""
        self.skew = Skew() if skewed else None
        """This process's reading of the store's clock, learned from its appends as the NATS
        world learns the server's (``clocks.py``). None when the seed keeps every clock in
        sync: hosts in sync read their own clock exactly (``Skew`` takes an offset below a
        sample's uncertainty as none), and so those seeds replay as before clocks were drawn."""

    def now(self) -> float:
        return clock.now() if self.skew is None else self.skew.now()

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        # A heartbeat is a clock sample too, as on NATS: a worker has one before it takes a
        # delivery, and keeps one current while it appends nothing.
        sent, stamp = clock.now(), self.store.now()
        await super().record_served(entries)
        if self.skew is not None:
            self.skew.sample(sent, clock.now(), stamp)

    def _chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    async def _latency(self) -> None:
        """A round trip to the store: at least one loop turn, now and then a few virtual
        milliseconds, so that other tasks run between a read and the write that follows it,
        as they do against a real store."""
        delay = self.rng.choice((0.0, 0.0, self.rng.uniform(0.0, 0.01)))
        if delay > 0:
            await asyncio.sleep(delay)
        else:  # ``asyncio.sleep(0)``'s one bare yield, without its coroutine
            await _yield()

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        await self._latency()
        return await super().list_events(run_id, after_seq)

    async def get_run(self, run_id: str) -> RunInfo | None:
        await self._latency()
        return await super().get_run(run_id)

    async def get_hook(self, token: str) -> HookInfo | None:
        await self._latency()
        return await super().get_hook(token)

    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        await self._latency()
        return await super().acquire_slot(key, holder, limit, lease=lease, token=token)

    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        await self._latency()
        if self._chance(self.plan.refuse_append):
            self.trace.note(f"{self.name} take token {key} refused (fault)")
            raise WorldUnavailableError("simulated: the store did not answer the token take")
        at = self.store.now()
        wait = await super().take_token(key, per_second, burst, holder)
        self.trace.note(f"{self.name} take token {key} for {str(holder)[-9:]}: wait {wait:.3f}")
        if wait <= 0.0 and self.on_token is not None:
            self.on_token(key, holder, at)
        return wait

    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        sent = clock.now()
        await self._latency()
        if self._chance(self.plan.slow_append):
            await asyncio.sleep(self.rng.uniform(0.0, 3.0))
        if self._chance(self.plan.refuse_append):
            self.trace.note(f"{self.name} append {run_id[-6:]} refused (fault)")
            raise WorldUnavailableError("simulated: the store did not answer the append")
        unpinned = self.on_unpinned_start is not None and _unpinned(
            self.store.logs.get(run_id, []), events
        )
        out = await super().append(run_id, events, expected_seq=expected_seq)
        if out and self.skew is not None:
            self.skew.sample(sent, clock.now(), out[0].created_at)
        if unpinned and self.on_unpinned_start is not None:
            self.on_unpinned_start(run_id)
        kinds = ",".join(f"{e.type}#{e.seq}" for e in out)
        self.trace.note(f"{self.name} append {run_id[-6:]} {kinds}")
        return out

    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        await self._latency()
        if self._chance(self.plan.delay_message):
            delay_seconds += self.rng.uniform(0.0, 5.0)
        mid = await super().enqueue(
            topic, payload, idempotency_key=idempotency_key, delay_seconds=delay_seconds
        )
        self.trace.note(f"{self.name} enqueue {topic} {_what(payload)} id={mid}")
        if idempotency_key is None and self._chance(self.plan.repeat_publish):
            again = await super().enqueue(topic, payload, delay_seconds=delay_seconds)
            self.trace.note(f"{self.name} enqueue repeated id={again} (fault)")
        return mid

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        # A long poll, as a server holds a pull open: the engine's short receive wait only
        # bounds how soon a stopping worker notices, and a stop cancels the receive anyway.
        # Each empty return costs a turn of every idle consumer; in virtual time, where the
        # clock jumps hours between events, those turns were half of a seed's CPU.
        wait_seconds = max(wait_seconds, IDLE_POLL_SECONDS)
        got = await super().receive(topic, max_messages=max_messages, wait_seconds=wait_seconds)
        for d in got:
            self.trace.note(f"{self.name} deliver {d.topic} id={d.message_id} #{d.attempt}")
        return got

    async def ack(self, delivery: Delivery) -> bool:
        await self._latency()
        if self._chance(self.plan.lose_ack):
            self.trace.note(f"{self.name} ack id={delivery.message_id} lost (fault)")
            return self._queue.held(delivery) is not None
        done = await super().ack(delivery)
        self.trace.note(f"{self.name} ack id={delivery.message_id} {done}")
        return done

    async def _outage(self, what: str) -> Outage | None:
        """The outage this renewal falls in, if any: refused at once, or (slow) held until
        the window ends and a little more. A lost one is refused after it lands."""
        outage = self.outage
        if outage is None or not outage.covers(self.store.now() - EPOCH):
            return None
        if outage.mode == "refused":
            self.trace.note(f"{self.name} renew {what} refused (outage)")
            raise WorldUnavailableError("simulated: the store refused the renewal (outage)")
        if outage.mode == "slow":
            hold = outage.end - (self.store.now() - EPOCH) + self.rng.uniform(0.0, 2.0)
            self.trace.note(f"{self.name} renew {what} held {hold:.3f}s (outage)")
            await asyncio.sleep(hold)
        return outage

    def _lost(self, outage: Outage | None, what: str) -> None:
        if outage is not None and outage.mode == "lost":
            self.trace.note(f"{self.name} renew {what} landed, its answer lost (outage)")
            raise WorldUnavailableError("simulated: the renewal's answer was lost (outage)")

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        await self._latency()
        if self.outage is not None:
            what = f"slot {key} of {holder[-9:]}"
            outage = await self._outage(what)
            won = await super().renew_slot(key, holder, lease=lease, token=token)
            self._lost(outage, what)
            if outage is not None:
                self.trace.note(f"{self.name} renew {what} late: {won}")
            return won
        if self._chance(self.plan.lose_renewal):
            self.trace.note(f"{self.name} renew slot {key} of {holder[-9:]} unanswered (fault)")
            raise WorldUnavailableError("simulated: the store did not answer the slot renewal")
        return await super().renew_slot(key, holder, lease=lease, token=token)

    async def renew(self, delivery: Delivery) -> bool:
        if self.outage is not None:
            what = f"id={delivery.message_id}"
            outage = await self._outage(what)
            done = await super().renew(delivery)
            self._lost(outage, what)
            return done
        if self._chance(self.plan.lose_renewal):
            self.trace.note(f"{self.name} renew id={delivery.message_id} unanswered (fault)")
            raise WorldUnavailableError("simulated: the store did not answer the renewal")
        return await super().renew(delivery)


@types.coroutine
def _yield() -> Generator[None, None, None]:
    """One loop turn, as ``asyncio.sleep(0)`` takes it (a bare yield, which a task takes as
    "run me again on the next turn")."""
    yield


def _unpinned(log: Sequence[Event], events: Sequence[NewEvent]) -> bool:
    """The batch begins a run that neither its ``run_created`` nor an earlier ``run_started``
    pinned to a definition: the process appending it took a run not pinned to it."""
    if not any(e.type is EventType.RUN_STARTED for e in events):
        return False
    return not any(
        e.data.get("definition") and e.type in (EventType.RUN_CREATED, EventType.RUN_STARTED)
        for e in log
    )


def _what(payload: Mapping[str, Any]) -> str:
    run = payload.get("runId")
    step = payload.get("stepId")
    out = f"run={str(run)[-6:]}" if isinstance(run, str) else ""
    return f"{out} step={step}" if step is not None else out
