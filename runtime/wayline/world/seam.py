"""The World contract: the only thing the runtime talks to for durability.

A world offers an event log (append with validation and optimistic concurrency, list, runs,
hooks by token) and a queue (``enqueue`` with idempotency keys and delays; deliveries with a
stable message id and an attempt count). Two worlds implement it, the embedded SQLite one and
JetStream, and one parametrised contract suite (``tests/contract``) holds both to it.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from .._core import clock
from .._core.events import Event, NewEvent, RunStatus
from .._core.ids import MessageId
from .._core.projections import RunInfo
from .._core.search_attributes import Where
from .checkup import Finding
from .hook_buffer import HookBuffer
from .routing import FLOW_TOPIC as FLOW_TOPIC
from .routing import STEP_TOPIC as STEP_TOPIC
from .routing import Router
from .single_flight import SingleFlight

# FLOW_TOPIC: run continuations, ``{"runId": ...}``; replays the run.
# STEP_TOPIC: queued step bodies, ``{"runId": ..., "stepId": ..., "stepName": ...}``.
# A world sends both to the run's route (``routing``): enqueue resolves it with ``router``,
# and a delivery received on a route carries the plain topic.

_HEARD_ENDED = 1024
"""Terminal hints remembered per world (run ids), for a result asked after the end."""


def terminal_statuses(statuses: Sequence[RunStatus] | None) -> list[str]:
    """The statuses a cleanup may take (all terminal ones by default); a live one is refused."""
    chosen = list(statuses) if statuses else [s for s in RunStatus if s.terminal]
    for status in chosen:
        if not RunStatus(status).terminal:
            raise ValueError(f"only terminal runs are cleaned up, not {status!r}")
    return [str(RunStatus(s)) for s in chosen]


class RunWatch:
    """A subscription to a world's change feed (:meth:`World.watch_runs`); ``close()`` ends
    it."""

    def __init__(self, close: Callable[[], Awaitable[None]]) -> None:
        self._close = close

    async def close(self) -> None:
        await self._close()


@dataclass(frozen=True, slots=True)
class HookInfo:
    token: str
    run_id: str
    correlation_id: str
    active: bool


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


class World(abc.ABC):
    """Durable event log + queue. See the module docstring and DESIGN "The World contract"."""

    url: str = ""
    unstable_message_ids: bool = False
    """True for worlds that mint a fresh id per delivery (the degraded mode of seed 000)."""

    def __init__(self) -> None:
        # In-process single-flight for step bodies (seed 000). One per world instance, not per
        # process, so two workers on two worlds in one process stay apart.
        self.single_flight = SingleFlight()
        self.router = Router(self.get_run)
        self._terminal_waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._heard_ended: OrderedDict[str, None] = OrderedDict()
        self._ends_heard = 0
        self._hint_losses = 0

    terminal_hints: bool = False
    """True when :meth:`watch_terminal` hears of every writer's terminal append, not only this
    instance's, and wakes every waiter when a hint may have been lost: a waiter then polls
    only as a safety net."""

    hears_every_end: bool = False
    """True when this world hears every terminal append, whoever waits (``heard_ended`` knows
    the recent ends): a handle fresh from ``start`` can then wait for its hint before its
    first read. Elsewhere that first read is made at once."""

    get_run_reads_log: bool = False
    """True when :meth:`get_run` folds the run's whole log, so an entry that does not read
    anywhere in it raises ``CorruptLogError``. Where it reads a summary row instead (SQLite),
    ``Client.get_run`` reads the log as well, as docs/hostile-input.md promises."""

    def watch_terminal(self, run_id: str) -> asyncio.Future[None]:
        """A future set when this world hears that the run may have ended: a hint, never a
        promise (the caller reads the run again). Watch before reading, so that an end
        between the read and the wait is not missed; :meth:`unwatch_terminal` after."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._terminal_waiters.setdefault(run_id, set()).add(fut)
        return fut

    def unwatch_terminal(self, run_id: str, fut: asyncio.Future[None]) -> None:
        waiters = self._terminal_waiters.get(run_id)
        if waiters is not None:
            waiters.discard(fut)
            if not waiters:
                del self._terminal_waiters[run_id]

    def _hints_may_be_lost(self) -> None:
        """A hint may have gone missing (the connection that carries them was lost, or a
        subscriber fell behind): every waiter wakes and reads once, rather than waiting for
        its poll."""
        self._hint_losses += 1
        for waiters in list(self._terminal_waiters.values()):
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def heard_ended(self, run_id: str) -> bool:
        """True when this world heard a terminal hint for the run lately (the last
        :data:`_HEARD_ENDED` runs), waiter or not (one of the tests of
        :meth:`may_have_ended_since`)."""
        return run_id in self._heard_ended

    def ends_mark(self) -> tuple[int, int]:
        """Where this world's hearing stands now, for :meth:`may_have_ended_since`."""
        return self._ends_heard, self._hint_losses

    def may_have_ended_since(self, run_id: str, mark: tuple[int, int]) -> bool:
        """False only when the run's end cannot have been heard since ``mark`` (taken when
        the run was known not to have ended) without this world knowing: it heard no hint
        for it, too few ends since to have forgotten one, and no hint was lost. A world
        that hears every end (``hears_every_end``) can then wait for the hint unread."""
        ends, losses = mark
        return (
            self.heard_ended(run_id)
            or self._ends_heard - ends >= _HEARD_ENDED
            or self._hint_losses != losses
        )

    def _wake_terminal(self, run_id: str) -> None:
        self._ends_heard += 1
        self._heard_ended[run_id] = None
        self._heard_ended.move_to_end(run_id)
        if len(self._heard_ended) > _HEARD_ENDED:
            self._heard_ended.popitem(last=False)
        for fut in self._terminal_waiters.pop(run_id, ()):
            if not fut.done():
                fut.set_result(None)

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """Call ``on_change(run_id)`` soon after any writer (any process) appends to a run's
        log. A hint, never a promise: the caller reads the run, and resyncs now and then, as a
        change can be missed (a reconnect, a slow consumer) or named twice. Watch before the
        first read, so that a change between the two is not missed. None when this world has
        no feed (the caller then polls)."""
        return None

    # lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:  # noqa: B027 - optional hook
        """Create what the world needs (tables, streams), idempotently."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Safe to call twice."""

    async def checkup(self, monitors: Sequence[str] = ()) -> list[Finding]:
        """What ``wayline doctor`` prints: whether this process can reach and use the store
        (address, credentials, TLS, limits) and whether the store fsyncs a write before it
        acknowledges it (``world.checkup``). Called on an unstarted world: it opens what it
        needs itself and creates nothing. What it finds is reported, not raised; it raises
        only for a bad argument (``monitors``: the NATS servers' monitoring URLs)."""
        return [Finding("world", "ok", f"{self.url}: this world has no checks")]

    async def sync_warning(self, monitors: Sequence[str] = ()) -> str | None:
        """On a started world, one line when the store acknowledges writes before they are on
        disk (a worker logs it at start); None when it fsyncs first or this world cannot tell.
        ``monitors`` as for :meth:`checkup`; an endpoint that does not answer raises
        :class:`WorldUnavailableError`."""
        return None

    async def __aenter__(self) -> World:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # event log ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        """Append ``events`` atomically, in order, validated by ``events.apply_transition``.

        With ``expected_seq`` the batch is appended only if the run's last sequence is exactly
        that number (0 for a new run), else :class:`SequenceConflictError`. A terminal run
        event also disposes the run's active hooks (their tokens become free).
        """

    @abc.abstractmethod
    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """Events with ``seq > after_seq``, in order."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunInfo | None: ...

    async def known_end(self, run_id: str) -> RunInfo | None:
        """The run's final view when this world instance already holds it (it appended or
        read the run's end), without a read; None otherwise. An ended run never changes, so
        what was seen ending is its view for good. The default knows none."""
        return None

    def log_mark(self, run_id: str) -> str | None:
        """An opaque mark of where this world instance's own view of the run's log ends, when
        it holds one (None otherwise; the default holds none). A message sent right after the
        caller's own append to the run may carry it (``logMark``): :meth:`read_run_at` given
        that mark in a process whose view still ends there, and is current, answers from that
        view without a read. Safe because every write is fenced against the log's end: a view
        that missed a later entry has its next append refused and read again, and the
        message's own cause (the append before it) is in the view (docs/nats.md)."""
        return None

    async def read_run_at(self, run_id: str, mark: str) -> tuple[RunInfo | None, list[Event]]:
        """:meth:`read_run`, answered from this instance's view of the run when it still ends
        at ``mark`` (a delivery's ``logMark``, see :meth:`log_mark`). The default reads."""
        return await self.read_run(run_id)

    async def read_run(self, run_id: str) -> tuple[RunInfo | None, list[Event]]:
        """The run and its whole log from one read where the world can (what a delivery drives
        from); ``(None, [])`` for an unknown run, no events for an ended one (a late message
        needs only its status). The default reads the two in turn."""
        info = await self.get_run(run_id)
        if info is None or info.status.terminal:
            return info, []
        return info, await self.list_events(run_id)

    @abc.abstractmethod
    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        """Newest first. ``where``: search attribute expressions that all hold, answered from
        the world's attribute index (``search_attributes.matches`` is the rule); ``since``:
        created at or after this time (epoch seconds)."""

    @abc.abstractmethod
    async def get_hook(self, token: str) -> HookInfo | None:
        """The active hook holding ``token``, or the most recent disposed one."""

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        """Remove the entry ``drop_seq`` of a run's log if it is one that does not read (does
        not decode, or does not follow from the entries before it; :class:`CorruptLogError`
        names it), then check the whole log reads again. Returns what was done; refuses
        (changing nothing) to remove an entry that reads."""
        raise NotImplementedError(f"{type(self).__name__} does not implement repair")

    def hook_buffer(self) -> HookBuffer:
        """The store of payloads sent before the wait (``hook_buffer``): what
        ``resume_hook(..., buffer=)`` stores and a new hook takes."""
        raise NotImplementedError(f"{type(self).__name__} does not buffer hook payloads")

    # queue ---------------------------------------------------------------------------------
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

    async def release(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        """Hand the delivery back undone (a graceful shutdown, or a step waiting for a
        concurrency slot): redelivered after ``delay_seconds``, and not counted against the
        run's delivery budget (the next delivery's ``attempt`` is this one's again). A world
        that cannot tell retries it."""
        return await self.retry(delivery, delay_seconds)

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

    # workers -------------------------------------------------------------------------------
    @abc.abstractmethod
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """A worker's heartbeat (or its withdrawal on a graceful close): merge one entry per
        definition it serves into the stored one, by ``key``, with ``registry.merge_served``,
        atomically (workers of one definition share its key). Entries are never removed."""

    @abc.abstractmethod
    async def list_served(self) -> list[dict[str, Any]]:
        """Every entry ever recorded (live or not: see its ``liveUntil``)."""

    # step streams ---------------------------------------------------------------------------
    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        """Append records to the run's stream ``stream``, in order. A record is a JSON
        object (see ``wayline._sdk.streams``)."""
        raise NotImplementedError(f"{type(self).__name__} does not store step streams")

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records of the stream from index ``start`` (0-based), in order."""
        raise NotImplementedError(f"{type(self).__name__} does not store step streams")

    # concurrency slots ----------------------------------------------------------------------
    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        """Take one of ``limit`` slots of ``key`` for ``holder`` (again: True at once).

        Without ``lease`` the holder is a run id, holding its slot while the run is live:
        holders whose runs have ended or are gone are dropped first. With ``lease`` (seconds)
        the holder is any name (a step of a run), holding its slot until ``lease`` seconds from
        now; taking it again renews the lease (a holder already running renews with
        :meth:`renew_slot`), :meth:`release_slot` ends it, and a holder whose
        lease ran out (it died) is dropped by whoever next looks at the key. A leased take
        records ``token`` (a fresh one per take) in place of the holder's previous one, so the
        take that held the holder before (a stale attempt of a step its redelivery took again)
        can neither renew nor give back what is now the new take's. Returns whether
        ``holder`` holds a slot now, and the holders after the attempt."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        """Extend ``holder``'s leased slot of ``key`` to ``lease`` seconds from now, only if it
        still holds it under a lease that has not run out, taken under ``token``. False means
        the slot is lost: the holder stalled past its lease, so another may have taken and even
        given back the slot meanwhile (a renewal that merely found room again would overlap
        with it), or the holder was taken again under another token (a redelivery). A slot
        recorded without a token (by a writer from before tokens), or a renewal without one,
        matches any."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        """Give back ``holder``'s slot of ``key`` (a no-op when it holds none, or holds it
        under a token other than ``token``: a later take's; no token on either side matches
        any)."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")

    # rate limits ---------------------------------------------------------------------------
    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        """Take one token from the bucket of ``key`` (``wayline.RateLimit``) for ``holder``: it
        holds at most ``burst`` tokens, starts full and gains ``per_second`` of them a second,
        by the world's clock, shared by every worker on the world (the arithmetic, with the
        reservations, is ``wayline._core.rate_limits.take``). Returns 0.0 when a token was
        taken, else the seconds until it is due: a ``holder`` that finds none has the next
        free token reserved for it, which it takes when it asks again from that time on."""
        raise NotImplementedError(f"{type(self).__name__} does not keep rate limits")

    # retention -----------------------------------------------------------------------------
    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        """Delete terminal runs that ended at least ``older_than`` seconds ago (inclusive:
        0 takes every terminal run, even one that ended this millisecond), with their events,
        hooks and queued messages. Returns how many runs were deleted."""
        raise NotImplementedError(f"{type(self).__name__} does not implement cleanup yet")

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        """Move up to ``limit`` (at most 1000) terminal runs that ended at least
        ``older_than`` seconds ago, with their events, to the archive in one transaction.
        Returns how many were moved; call again until it returns 0."""
        raise NotImplementedError(f"{type(self).__name__} does not implement archive yet")

    async def archived_count(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement archive yet")

    @property
    def visibility_seconds(self) -> float:
        return 30.0

    def now(self) -> float:
        """The world's time (seconds since the epoch), as this process best knows it: what
        a wait's ``resumeAt``, a step's lease and a delayed message are measured against,
        since the events they come from are stamped by the world. The embedded world stamps
        with this process's clock; a world stamped by a server (NATS) corrects this process's
        clock by the offset its own appends showed (``worlds/nats/skew.py``)."""
        return clock.now()


def flow_message(
    world: World, run_id: str, reason: str, *, after_own_append: bool = False
) -> dict[str, Any]:
    """A flow message's payload; ``after_own_append``: sent right after the caller's own
    append to the run, so it carries the world's ``logMark`` when it holds one
    (:meth:`World.log_mark`)."""
    payload: dict[str, Any] = {"runId": run_id, "reason": reason}
    mark = world.log_mark(run_id) if after_own_append else None
    if mark is not None:
        payload["logMark"] = mark
    return payload
