"""The work-queue port: messages with idempotency keys and delays, and deliveries with a
stable message id and an attempt count.

FLOW_TOPIC: run continuations, ``{"runId": ...}``; replays the run.
STEP_TOPIC: queued step bodies, ``{"runId": ..., "stepId": ..., "stepName": ...}``.
A world sends both to the run's route (``routing``): enqueue resolves it with ``router``,
and a delivery received on a route carries the plain topic.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._core.ids import MessageId


@dataclass(slots=True)
class Delivery:
    """One delivery of a queued message.

    ``message_id`` is stable across redeliveries of the same message; ``attempt`` counts
    deliveries from 1, graceful hand-backs (:meth:`World.release`) excepted. ``payload`` is
    None when the stored bytes were not a JSON object (``raw`` keeps them for the dead-letter
    record).
    """

    topic: str
    message_id: MessageId
    attempt: int
    payload: dict[str, Any] | None
    raw: bytes
    handle: Any = None
    """World-private: what the world needs to ack, renew or retry this delivery."""
    due_at: float | None = None
    """When the message became due (epoch seconds), where the world knows: queue lag."""
    held_since: float = field(default_factory=lambda: time.monotonic())
    """When the world's hold of this delivery began (``time.monotonic``): the worker times
    the hold, its deadline and its patience for writes from it. A world whose hold can begin
    well before the delivery is made (a NATS pull answered late) sets it; otherwise now."""
    handbacks: int = 0
    """The graceful hand-backs (:meth:`World.release`) of this message before this delivery,
    the ones ``attempt`` leaves out."""
    held_handbacks: int = 0
    """How many of those hand-backs were, in a row just before this delivery, made because the
    message's run was paused over a step it holds (``release(held=True)``): a held delivery's
    next hand-back grows with them (``planning.held_delay``). A hand-back for any other reason
    (a slot's or a rate limit's wait, a worker's close) or a counted delivery (a retry, or a
    redelivery after its holder died or its visibility ran out) starts it from 0 again, so
    waits before a pause never lengthen the pause's hand-backs, nor one pause's hand-backs a
    later pause's. A message stored by a version that did not keep it reads 0."""


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """What waits on one topic: the console's queue lag (docs/console.md, "Workers")."""

    topic: str
    ready: int
    """Messages due now that no worker holds (delayed and in-flight ones are not counted)."""
    oldest_ready_at: float
    """When the longest-waiting of them became due (epoch seconds): ``now - oldest_ready_at``
    is how long the topic's workers are behind."""


@dataclass(frozen=True, slots=True)
class LaneDrain:
    """What :meth:`WorkQueue.drain_lanes` did: the messages it moved to the store every release
    reads, and those it left where they are."""

    moved: int
    held: int
    """Messages delivered and not acked (a worker may hold them): left unless asked to move
    them too."""
    delayed: int
    """Delayed messages (schedules) that will fire onto a subject a release before the
    levels does not read: moved by a drain after they fire."""

    def __add__(self, other: LaneDrain) -> LaneDrain:
        """Both drains' counts together (two partitions' queues, say)."""
        return LaneDrain(
            moved=self.moved + other.moved,
            held=self.held + other.held,
            delayed=self.delayed + other.delayed,
        )

    @classmethod
    def total(cls, drains: Iterable[LaneDrain]) -> LaneDrain:
        """The counts of ``drains`` summed; every count 0 for none."""
        return sum(drains, cls(moved=0, held=0, delayed=0))


class WorkQueue(abc.ABC):
    """The queue a worker receives from and settles deliveries on."""

    unstable_message_ids: bool = False
    """True for worlds that mint a fresh id per delivery (the degraded mode of seed 000)."""

    @abc.abstractmethod
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        """Queue a message. While a message with the same key is stored or in flight, the call
        is a no-op returning that message's id; the key is released when it is acked.

        ``recoverable``: the log alone brings the message back if it is lost (a start: workers
        re-arm a live run with no message, ``_engine.lost_starts``), so a world may store it
        without making it durable on its own (SQLite: no fsync of its own; the next synced
        commit makes it durable, and only an OS crash before that loses it)."""

    @abc.abstractmethod
    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        """Up to ``max_messages`` due deliveries, waiting at most ``wait_seconds`` for one."""

    # A delivery is settled only by its holder. Once the message was redelivered (B holds
    # attempt n+1), A's late ack, retry, renew or dead-letter changes nothing and answers
    # False; so does a second settlement of one delivery. True: this delivery was settled.
    @abc.abstractmethod
    async def ack(self, delivery: Delivery) -> bool:
        """Done: the message is removed and its idempotency key released. A world may send
        the ack without waiting for its store to confirm it (NATS): the removal then follows
        shortly, and a lost ack brings the message back after its visibility timeout, one
        more delivery of what is done (True then says the ack was sent while held)."""

    @abc.abstractmethod
    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        """Not done: deliver the same message (same id, attempt + 1) after ``delay_seconds``."""

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        """Hand the delivery back undone (a graceful shutdown, or a step waiting for a
        concurrency slot): redelivered after ``delay_seconds``, and not counted against the
        run's delivery budget (the next delivery's ``attempt`` is this one's again). ``held``:
        handed back because the run is paused over a step the message holds; the next
        delivery's ``held_handbacks`` is this one's plus 1, where any other hand-back (and a
        retry) makes it 0. A world that cannot tell retries it."""
        return await self.retry(delivery, delay_seconds)

    @abc.abstractmethod
    async def cancel_delayed(self, message_id: MessageId) -> bool:
        """Withdraw a delayed message that this process enqueued (``message_id`` as its
        :meth:`enqueue` returned) before it is first delivered: True when it is now never
        delivered, and its idempotency key is free. False, changing nothing, when it was
        delivered already (held, handed back or acked), when it is gone, or when this process
        cannot tell which stored message the id names (NATS knows a schedule's stream sequence
        only from its own publish). A cancel is an optimisation: the caller must be right
        whether it lands or not, and a cancel racing the message's delivery may lose."""

    @abc.abstractmethod
    async def renew(self, delivery: Delivery) -> bool:
        """Still working: keep the delivery invisible to others for another visibility period.
        False: the delivery is no longer this holder's (its holder stops executing under it);
        a renewal the store did not answer raises :class:`WorldUnavailableError` instead (the
        holder keeps the hold its last renewal proved)."""

    @abc.abstractmethod
    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        """Set a message aside (kept for inspection, never redelivered) and remove it."""

    @abc.abstractmethod
    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]: ...

    async def runs_with_messages(self) -> set[str] | None:
        """The runs that some stored message names (queued, delayed or in flight): each has a
        wake coming. ``None`` when the world cannot tell (recovery then re-arms every run)."""
        return None

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        """How many messages of each of ``topics`` are due and not held by a worker (a
        backlog: what the operator scales a WorkflowWorker's version on). Delayed messages
        are not counted until they are due. Every topic asked for is in the answer."""
        raise NotImplementedError(f"{type(self).__name__} does not count ready messages")

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        """How many messages of each of ``topics`` a worker holds now: delivered and not yet
        acked, retried or handed back, their visibility not lapsed (a message retried or
        handed back with a delay waits out that delay held by no one). The operator keeps a
        WorkflowWorker's version up while any is held, as scaling it down would stop a step
        in its body. Every topic asked for is in the answer."""
        raise NotImplementedError(f"{type(self).__name__} does not count in-flight messages")

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        """How many messages of each of ``topics`` wait out a delay (a durable sleep's wake, a
        retry's backoff, a hand-back's wait: not due yet, held by no worker) and fall due at
        or before ``before`` (epoch seconds, the world's clock). Neither ready nor in flight,
        they are the work just ahead: the operator brings a WorkflowWorker's version up
        before a wave of sleeping runs falls due, not after. Every topic asked for is in the
        answer."""
        raise NotImplementedError(f"{type(self).__name__} does not count delayed messages")

    async def queue_depths(self) -> list[QueueDepth] | None:
        """Every topic with a ready message, by topic. ``None`` when the world cannot tell
        (the console then shows no lag rather than a wrong one)."""
        return None

    async def drain_lanes(self, *, held_too: bool = False) -> LaneDrain:
        """Move every queued message off the subjects a release before the priority levels
        does not read (another priority, a fairness key) to the one it does, before a rollback
        to such a release (docs/nats.md, "Rolling back"). A message keeps its payload (its
        priority and key, which such a release ignores and a later one honours again) and its
        idempotency key; it is copied first and removed after, so a drain cut off in between
        leaves one message twice (a wake more), never none. A message a worker may hold is
        left and counted unless ``held_too``. A world that keeps every level in one store
        (SQLite, in memory) has nothing to move."""
        return LaneDrain(moved=0, held=0, delayed=0)

    @property
    def visibility_seconds(self) -> float:
        return 30.0
