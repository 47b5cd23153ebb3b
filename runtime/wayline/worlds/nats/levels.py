"""Which priority levels of one topic may hold a ready message, as one process knows it.

A topic's messages live on one subject per priority level (``<prefix>.q.p<level>.<topic>.<id>``;
``q.t``, ``None`` here, for the one subject every level shared before the levels, which now
holds the default priority's messages while each other priority has its own). Asking the
stream about each of the eleven costs eleven requests, so a receive asks only about the levels
this record names: every level found holding a message by the last full scan, and every level
a publish was heard on since (a plain subscription to the topic's subjects sees every publish;
a schedule's publish names its target level in ``Nats-Schedule-Target``). A level leaves the
record only when a request finds nothing stored on it and nothing was heard on it meanwhile,
and never while a schedule of it may be pending. A full scan every ``RESCAN_SECONDS`` of a
waiting receive finds what no publish told (messages stored before this process subscribed, a
schedule stored before it did).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..._core import ordering
from ...waits import wait_set
from .names import kind_lane, kind_level

RESCAN_SECONDS = 2.0
"""How often a receive that waits scans every level again: the latest a message this process
heard nothing of (a schedule stored before it subscribed) is found."""

LANE_SCAN_EVERY = 4
"""A full scan asks the fair lanes (``names.FAIR_LANES`` a level, eighty in all) only every
fourth time, so every 8 s: a lane's publish is heard as any other's, and the scan only finds
what no publish told, so asking eighty more subjects every 2 s would cost more than it finds.
A scan of a topic that stores nothing asks nothing of its own: one request a queue stream
(``StreamProbe``, ``queue.Queue._scan``) answers for every lane of every topic served, and is
not counted here."""

Channel = str
"""A subject of a topic's ready messages: its kind (``names.kind_of``), ``t`` for the subject
every level shared before the levels, ``p<level>`` for a level, ``p<level>f<lane>`` for one
of a level's fair lanes."""


class Levels:
    """One topic's levels that may hold a message, and its publishes as they are heard."""

    def __init__(self) -> None:
        self.sub: Any = None
        self.count = 0
        """Publishes heard on the topic so far."""
        self.stored: set[Channel] = set()
        self.scheduled: set[Channel] = set()
        """Levels a schedule was heard for: kept until a full scan finds no schedule."""
        self.scanned_at: float | None = None
        """When (monotonic) the last full scan was asked; None: never."""
        self.scans = 0
        """Full scans asked so far (the lanes are asked by every ``LANE_SCAN_EVERY``-th)."""
        self.fair: dict[int, ordering.FairClock] = {}
        """Per priority level, the fair clock of its lanes (``queue._fair_turns``): this
        process's own, so the turns are fair among what this process takes."""
        self.since = time.monotonic()
        """When (monotonic) the record began to hear the topic's publishes: a question of the
        ``StreamProbe`` sent before then does not answer for the topic."""
        self.heard_at = float("-inf")
        """When (monotonic) the last publish on the topic was heard."""
        self._heard: dict[Channel, int] = {}
        self._event = asyncio.Event()

    def on_msg(self, msg: Any) -> None:
        parts = str(msg.subject).split(".")
        kind = parts[2] if len(parts) == 5 else ""
        scheduled = kind == "s"
        if scheduled:
            target = str((msg.headers or {}).get("Nats-Schedule-Target", "")).split(".")
            kind = target[2] if len(target) == 5 else ""
        try:
            kind_level(kind)
        except ValueError:  # not a subject this world writes: nothing to learn from it
            pass
        else:
            level = kind
            self.stored.add(level)
            self._heard[level] = self._heard.get(level, 0) + 1
            if scheduled:
                self.scheduled.add(level)
        self.count += 1
        self.heard_at = time.monotonic()
        self._event.set()
        self._event = asyncio.Event()

    def heard(self, level: Channel) -> int:
        return self._heard.get(level, 0)

    def found_empty(self, level: Channel, heard_before: int) -> None:
        """Nothing was stored on ``level`` when asked: it leaves the record, unless a publish
        on it was heard since the question or a schedule of it may be pending."""
        if self.heard(level) == heard_before and level not in self.scheduled:
            self.stored.discard(level)

    def scanned(
        self, found: set[Channel], heard_before: dict[Channel, int], scheduled: set[Channel]
    ) -> None:
        """A full scan asked the subjects of ``heard_before`` and found ``found`` holding
        messages, and schedules pending for the subjects ``scheduled`` (a schedule heard of
        since the scan asked is kept too). A subject it did not ask keeps its place."""
        self.scheduled = scheduled | {
            level for level in self.scheduled if self.heard(level) != heard_before.get(level, 0)
        }
        for level in list(self.stored):
            if level in heard_before and level not in found:
                self.found_empty(level, heard_before.get(level, 0))
        self.stored |= found | scheduled

    def take_turns(self, level: int, pulled: list[tuple[Channel, int, list[Any]]]) -> list[Any]:
        """The messages pulled from one level's subjects (each with the weight its turns were
        counted with), in the order of their fair turns, which move the level's fair clock:
        each next message is of the lane of the lowest start tag, ties to the subject pulled
        first (``ordering.FairClock``, a lane in place of a key)."""
        clock = self.fair.setdefault(level, ordering.FairClock())
        queues: dict[Channel, tuple[int, collections.deque[Any]]] = {}
        for channel, weight, msgs in pulled:
            if not msgs:
                continue
            queues.setdefault(channel, (weight, collections.deque()))[1].extend(msgs)
        rank = {channel: i for i, channel in enumerate(queues)}
        out: list[Any] = []
        while queues:
            channel = min(
                queues,
                key=lambda c: (
                    max(clock.virtual, clock.finish.get(kind_lane(c), 0.0)),
                    rank[c],
                ),
            )
            weight, waiting = queues[channel]
            clock.served(clock.tag(kind_lane(channel), weight))
            out.append(waiting.popleft())
            if not waiting:
                del queues[channel]
        return out

    async def wait_after(self, seen: int, timeout: float) -> None:
        """Wait until a publish after the ``seen``-th one, at most ``timeout`` seconds, or
        until :meth:`wake`."""
        if self.count != seen:
            return
        await wait_set(self._event, timeout)

    def wake(self) -> None:
        """End every wait in progress, as a publish would, though nothing was heard: a lost
        connection ends the receives waiting on it at once (``Queue.lost_connection``)."""
        self._event.set()
        self._event = asyncio.Event()


class StreamProbe:
    """Whether any topic a process serves on a queue stream stores anything, asked once for
    all of them (one direct get over every subject of those topics): a rescan of a topic due
    after a question was sent takes its answer rather than asking its own, so an idle worker's
    rescans cost one request a queue stream and rescan period, whatever its topics. Only when
    something is stored does a topic ask about its own subjects (``queue.Queue._scan``).
    A question answers for the topics whose record began before it was sent (``Levels.since``).
    """

    def __init__(self, ask: Callable[[], Awaitable[bool]]) -> None:
        self._ask = ask
        self.asked_at: float | None = None
        """When (monotonic) the question of the latest answer was sent."""
        self.empty = False
        """The latest answer: nothing was stored when it was asked."""
        self.asks = 0
        """Questions sent so far."""
        self._pending: asyncio.Future[tuple[float, bool]] | None = None
        self._pending_at = float("-inf")

    async def since(self, after: float) -> tuple[float, bool]:
        """When a question sent after ``after`` (monotonic) was sent, and whether nothing was
        stored then: the latest answer if its question was sent after ``after``, else the one
        on its way if sent after it, else a new question's."""
        if self.asked_at is not None and self.asked_at > after:
            return self.asked_at, self.empty
        if self._pending is None or self._pending_at <= after:
            self._pending_at = time.monotonic()
            self._pending = asyncio.ensure_future(self._question(self._pending_at))
            # read by whoever awaits it; retrieved here too, so an answer no one waited
            # for (every asker cancelled) is not logged as never retrieved
            self._pending.add_done_callback(_retrieved)
        # shielded: one receive cancelled does not cancel the question the others wait on
        return await asyncio.shield(self._pending)

    async def _question(self, at: float) -> tuple[float, bool]:
        self.asks += 1
        try:
            empty = await self._ask()
        finally:
            if self._pending_at == at:
                self._pending = None
        if self.asked_at is None or at > self.asked_at:
            self.asked_at, self.empty = at, empty
        return at, empty


def _retrieved(future: asyncio.Future[tuple[float, bool]]) -> None:
    if not future.cancelled():
        future.exception()
