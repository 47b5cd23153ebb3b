"""``MemoryWorld``: the World contract on a :class:`~.store.MemoryStore`.

Several worlds opened on one store behave as several processes on one database: each has its
own single-flight and terminal waiters (``World``), and they share the log, the queue and the
slots. Every wait is an ``asyncio`` wait, so on the simulator's loop (``wayline.sim``) the
whole world runs on virtual time. Large payloads stay inline: nothing here has a size limit.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._core import ordering, rate_limits, search_attributes
from ..._core.events import RUN_TERMINAL_EVENTS, Event, NewEvent, RunStatus
from ..._core.ids import MessageId
from ..._core.search_attributes import Where
from ...settings import Settings
from ...telemetry import carry
from ...world import (
    Delivery,
    HookInfo,
    QueueDepth,
    RunInfo,
    RunWatch,
    World,
    terminal_statuses,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, orphan_grace
from ...world.ports.blobs import BlobRef, digest_of
from ...world.registry import merge_served
from ...world.routing import plain_topic
from .hook_buffer import MemoryHookBuffer
from .store import MemoryStore, Message, Slot, run_of


class MemoryWorld(World):
    url = "memory://"
    terminal_hints = True
    """Every end appended on the store is heard at once by every world opened on it."""
    hears_every_end = True

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        visibility_seconds: float | None = None,
        aging_seconds: float = ordering.AGING_SECONDS,
        orphan_grace_seconds: float = ORPHAN_GRACE_SECONDS,
    ) -> None:
        super().__init__()
        self._aging = aging_seconds
        self._orphan_grace = orphan_grace(orphan_grace_seconds)
        self.store = store if store is not None else MemoryStore()
        if visibility_seconds is None:
            visibility_seconds = Settings.from_env().visibility_seconds
        self._visibility = visibility_seconds
        # Ordered (a dict, not a set of objects hashed by address), so that who is woken first
        # is the same in every run: the simulator replays a seed from it.
        self._wakers: dict[asyncio.Event, str] = {}
        """Each receive waiting, and the topic it waits on: a message wakes only the receives
        of its own topic (waking every receive of every topic made a simulated seed spend
        most of its time on receives that found nothing)."""
        self._watchers: dict[Callable[[str], None], None] = {}
        self.store.peers.append(weakref.ref(self))

    @property
    def visibility_seconds(self) -> float:
        return self._visibility

    def now(self) -> float:
        """The store's clock, which stamps its events: the world's time, which this process
        reads exactly since the store lives in it."""
        return self.store.now()

    def _peers(self) -> list[MemoryWorld]:
        return [w for w in (ref() for ref in self.store.peers) if w is not None]

    # event log ---------------------------------------------------------------------------
    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        if not events:
            return []
        out = self.store.append(run_id, events, expected_seq, self.store.now())
        self.store.appends += 1
        ended = events[-1].type in RUN_TERMINAL_EVENTS
        for peer in self._peers():
            if ended:
                peer._wake_terminal(run_id)
            for watcher in list(peer._watchers):
                asyncio.get_running_loop().call_soon(watcher, run_id)
        return out

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return [e for e in self.store.logs.get(run_id, []) if e.seq > after_seq]

    async def get_run(self, run_id: str) -> RunInfo | None:
        return self.store.runs.get(run_id)

    # every payload of the memory world's events is inline: as stored is as read
    async def stored_run(self, run_id: str) -> RunInfo | None:
        return await self.get_run(run_id)

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self.list_events(run_id, after_seq)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        # a scan: the simulator's worlds hold a few runs, and the other worlds' index answers
        # exactly what this filter does (the contract suite holds all three to it)
        found = [
            i
            for i in self.store.runs.values()
            if status in (None, i.status)
            and workflow in (None, i.workflow)
            and (since is None or i.created_at >= since)
            and search_attributes.matches(where, search_attributes.stored(i.attributes))
        ]
        found.sort(key=lambda i: i.run_id)
        found.sort(key=lambda i: i.created_at, reverse=True)
        return found[:limit]

    def hook_buffer(self) -> MemoryHookBuffer:
        return self.store.hook_buffer

    async def runs_mark(self) -> int | None:
        return self.store.appends

    async def get_hook(self, token: str) -> HookInfo | None:
        row = self.store.hook(token)
        return None if row is None else HookInfo(row.token, row.run_id, row.cid, row.active)

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        self._watchers[on_change] = None

        async def close() -> None:
            self._watchers.pop(on_change, None)

        return RunWatch(close)

    # queue ---------------------------------------------------------------------------------
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        topic = await self.router.topic(topic, payload)
        store = self.store
        if idempotency_key is not None and idempotency_key in store.keys:
            return MessageId(str(store.keys[idempotency_key]))
        now = self.store.now()
        mid = store.next_message
        store.next_message += 1
        # The run's ordering is on the payload already when it has one: the sender puts it
        # there (``world.sending``), and the world stores what it is given.
        stored = carry(payload)
        body = json.dumps(stored).encode()
        order = ordering.of_payload(stored)
        at = now + max(0.0, delay_seconds)
        fair = store.fair_clocks.setdefault(topic, ordering.FairClock())
        store.messages[mid] = Message(
            mid,
            topic,
            body,
            idempotency_key,
            at,
            now,
            level=order.priority,
            ready_at=at,
            fair_tag=fair.tag(order.fairness_key, order.fairness_weight),
        )
        if idempotency_key is not None:
            store.keys[idempotency_key] = mid
        self._wake(topic)
        return MessageId(str(mid))

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        waker = asyncio.Event()
        self._wakers[waker] = topic
        try:
            while True:
                got = self._claim(topic, max_messages)
                remaining = deadline - loop.time()
                if got or remaining <= 0:
                    return got
                nap = remaining
                due = [m.available_at for m in self.store.messages.values() if m.topic == topic]
                if due:
                    nap = min(nap, max(0.0, min(due) - self.store.now()) + 0.001)
                waker.clear()
                try:
                    await asyncio.wait_for(waker.wait(), timeout=nap)
                except TimeoutError:
                    pass
        finally:
            self._wakers.pop(waker, None)

    def _claim(self, topic: str, limit: int) -> list[Delivery]:
        now = self.store.now()
        ready = [
            m for m in self.store.messages.values() if m.topic == topic and m.available_at <= now
        ]
        oldest: dict[int, float] = {}
        for m in ready:
            oldest[m.level] = min(oldest.get(m.level, m.ready_at), m.ready_at)
        place = {level: i for i, level in enumerate(ordering.level_order(oldest, now, self._aging))}
        due = sorted(ready, key=lambda m: (place[m.level], m.fair_tag, m.id))[:limit]
        if due:
            self.store.fair_clocks[topic].served(max(m.fair_tag for m in due))
        out: list[Delivery] = []
        for m in due:
            due_at = m.available_at
            m.attempts += 1
            m.held = True
            m.available_at = now + self._visibility
            out.append(
                Delivery(
                    plain_topic(topic),
                    MessageId(str(m.id)),
                    m.attempts - m.handbacks,  # graceful hand-backs do not count
                    _decode(m.body),
                    m.body,
                    (m.id, m.attempts),  # the claim's attempt count fences every settlement
                    due_at,
                    time.monotonic(),
                )
            )
        return out

    def _held(self, delivery: Delivery) -> Message | None:
        """The message, when this delivery is still the one that holds it."""
        mid, attempts = delivery.handle
        message = self.store.messages.get(mid)
        return message if message is not None and message.attempts == attempts else None

    async def ack(self, delivery: Delivery) -> bool:
        message = self._held(delivery)
        if message is None:
            return False
        self.store.remove_message(message.id)
        return True

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return self._hand_back(delivery, delay_seconds, counted=True)

    async def release(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return self._hand_back(delivery, delay_seconds, counted=False)

    def _hand_back(self, delivery: Delivery, delay_seconds: float, *, counted: bool) -> bool:
        message = self._held(delivery)
        if message is None:
            return False
        message.available_at = self.store.now() + max(0.0, delay_seconds)
        message.ready_at = message.available_at
        message.held = False
        if not counted:
            message.handbacks += 1
        self._wake(message.topic)
        return True

    async def renew(self, delivery: Delivery) -> bool:
        message = self._held(delivery)
        if message is None:
            return False
        message.available_at = self.store.now() + self._visibility
        return True

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        message = self._held(delivery)
        if message is None:
            return False
        self.store.remove_message(message.id)
        self.store.dead_letters.append(
            {
                "messageId": delivery.message_id,
                "topic": delivery.topic,
                "payload": delivery.raw.decode(errors="replace"),
                "attempts": delivery.attempt,
                "reason": reason,
                "createdAt": self.store.now(),
            }
        )
        return True

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return list(reversed(self.store.dead_letters))[:limit]

    async def runs_with_messages(self) -> set[str] | None:
        found = (run_of(m.body) for m in self.store.messages.values())
        return {r for r in found if r is not None}

    async def queue_depths(self) -> list[QueueDepth] | None:
        now, found = self.store.now(), dict[str, tuple[int, float]]()
        for m in self.store.messages.values():
            # a held message's available_at is its visibility deadline: not ready until then
            if m.available_at <= now:
                count, oldest = found.get(m.topic, (0, m.available_at))
                found[m.topic] = (count + 1, min(oldest, m.available_at))
        return [QueueDepth(t, n, at) for t, (n, at) in sorted(found.items())]

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        out = dict.fromkeys(topics, 0)
        now = self.store.now()
        for m in self.store.messages.values():
            # a held message's available_at is its visibility deadline (as in ``_claim``)
            if m.topic in out and m.available_at <= now:
                out[m.topic] += 1
        return out

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        out = dict.fromkeys(topics, 0)
        now = self.store.now()
        for m in self.store.messages.values():
            # a held message whose visibility deadline passed is due again (as in ``_claim``)
            if m.topic in out and m.held and m.available_at > now:
                out[m.topic] += 1
        return out

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        out = dict.fromkeys(topics, 0)
        now = self.store.now()
        for m in self.store.messages.values():
            # a held message's available_at is its visibility deadline, not a delay
            if m.topic in out and not m.held and now < m.available_at <= before:
                out[m.topic] += 1
        return out

    def _wake(self, topic: str) -> None:
        for peer in self._peers():
            for waker, waits_on in peer._wakers.items():
                if waits_on == topic:
                    waker.set()

    # workers -------------------------------------------------------------------------------
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        for entry in entries:
            key = str(entry["key"])
            merged = merge_served(self.store.served.get(key), entry)
            if merged is not None:
                self.store.served[key] = json.loads(json.dumps(merged))

    async def list_served(self) -> list[dict[str, Any]]:
        return [dict(self.store.served[k]) for k in sorted(self.store.served)]

    # step streams ---------------------------------------------------------------------------
    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        copies = [json.loads(json.dumps(dict(r))) for r in records]
        self.store.streams.setdefault((run_id, stream), []).extend(copies)

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        records = self.store.streams.get((run_id, stream), [])
        first = max(0, start)
        return [dict(r) for r in records[first : first + max(1, limit)]]

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
        now = self.store.now()
        slots = self.store.slots.setdefault(key, {})
        for name, slot in list(slots.items()):
            if slot.expires_at is not None and slot.expires_at <= now:
                del slots[name]
            elif slot.expires_at is None:
                info = self.store.runs.get(name)
                if info is None or info.status.terminal:
                    del slots[name]  # a run's slot is held while the run is live
        holders = sorted(slots, key=lambda name: (slots[name].acquired_at, name))
        until = None if lease is None else now + lease
        if holder in holders:
            if until is not None:  # taken again: the lease and the take's token are new
                slots[holder].expires_at = until
                slots[holder].token = token
            return True, holders
        if len(holders) >= limit:
            return False, holders
        slots[holder] = Slot(now, until, token if until is not None else None)
        return True, [*holders, holder]

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        now = self.store.now()
        slot = self.store.slots.get(key, {}).get(holder)
        if slot is None or slot.expires_at is None or slot.expires_at <= now:
            return False
        if not _same_take(slot, token):
            return False
        slot.expires_at = now + lease
        return True

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        slots = self.store.slots.get(key, {})
        slot = slots.get(holder)
        if slot is not None and _same_take(slot, token):
            del slots[holder]

    # rate limits ---------------------------------------------------------------------------
    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        bucket, wait = rate_limits.take(
            self.store.buckets.get(key), self.store.now(), per_second, burst, holder
        )
        if bucket is not None:
            self.store.buckets[key] = bucket
        return wait

    # retention -----------------------------------------------------------------------------
    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        chosen = terminal_statuses(statuses)
        ids = self.store.ended_before(self.store.now() - max(0.0, older_than), chosen)
        self.store.drop_runs(ids)
        self.store.drop_orphan_blobs(self.store.now() - self._orphan_grace)
        return len(ids)

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        cutoff = self.store.now() - max(0.0, older_than)
        ids = self.store.ended_before(cutoff, terminal_statuses(None))[: max(1, min(1000, limit))]
        self.store.drop_runs(ids)
        self.store.archived += len(ids)
        return len(ids)

    async def archived_count(self) -> int:
        return self.store.archived

    # blobs ---------------------------------------------------------------------------------
    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        digest = digest_of(data)
        self.store.blobs.setdefault((run_id, digest), (bytes(data), self.store.now()))
        return BlobRef(digest, len(data))

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        found = self.store.blobs.get((run_id, ref.digest))
        return None if found is None else found[0]

    # payload_blob: the port's default (None), as every payload here is inline


def _same_take(slot: Slot, token: str | None) -> bool:
    """A renewal or give-back acts on the take that holds the slot now; no token on either
    side matches any (as the other worlds do)."""
    return slot.token is None or token is None or slot.token == token


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
