"""The queue of a memory world: the store's messages, claimed by level, then fair tag, then
id (``ordering``), each claim fencing its settlements by its attempt count; a receive waits
on an ``asyncio`` event that a message of its topic sets, in every world opened on the store."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..._core import ordering
from ..._core.ids import MessageId
from ...telemetry import carry
from ...waits import wait_set
from ...world import Delivery, QueueDepth
from ...world.routing import plain_topic
from .store import MemoryStore, Message, run_of


class MemoryQueue:
    def __init__(
        self,
        store: MemoryStore,
        *,
        visibility: float,
        aging: float,
        peers: Callable[[], list[MemoryQueue]],
    ) -> None:
        self.store = store
        self._visibility = visibility
        self._aging = aging
        self._peers = peers
        """The queues of every world opened on the store, this one's included."""
        # Ordered (a dict, not a set of objects hashed by address), so that who is woken first
        # is the same in every run: the simulator replays a seed from it.
        self._wakers: dict[asyncio.Event, str] = {}
        """Each receive waiting, and the topic it waits on: a message wakes only the receives
        of its own topic (waking every receive of every topic made a simulated seed spend
        most of its time on receives that found nothing)."""

    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
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
        store.add_message(
            Message(
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
                mine = self.store.topics.get(topic)
                if mine:
                    due = min(m.available_at for m in mine.values())
                    nap = min(nap, max(0.0, due - self.store.now()) + 0.001)
                waker.clear()
                await wait_set(waker, nap)
        finally:
            self._wakers.pop(waker, None)

    def _claim(self, topic: str, limit: int) -> list[Delivery]:
        now = self.store.now()
        mine = self.store.topics.get(topic)
        if not mine:
            return []
        ready = [m for m in mine.values() if m.available_at <= now]
        if not ready:
            return []
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
            if m.held:  # its holder died holding it: a counted delivery ends the held run
                m.held_handbacks = 0
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
                    m.handbacks,
                    m.held_handbacks,
                )
            )
        return out

    def held(self, delivery: Delivery) -> Message | None:
        """The message, when this delivery is still the one that holds it."""
        mid, attempts = delivery.handle
        message = self.store.messages.get(mid)
        return message if message is not None and message.attempts == attempts else None

    async def ack(self, delivery: Delivery) -> bool:
        message = self.held(delivery)
        if message is None:
            return False
        self.store.remove_message(message.id)
        return True

    async def cancel_delayed(self, message_id: MessageId) -> bool:
        """Remove the message while no claim has taken it (``attempts`` is 0)."""
        try:
            message = self.store.messages.get(int(message_id))
        except ValueError:
            return False
        if message is None or message.attempts or message.held:
            return False
        self.store.remove_message(message.id)
        return True

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return self._hand_back(delivery, delay_seconds, counted=True)

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        return self._hand_back(delivery, delay_seconds, counted=False, held=held)

    def _hand_back(
        self, delivery: Delivery, delay_seconds: float, *, counted: bool, held: bool = False
    ) -> bool:
        message = self.held(delivery)
        if message is None:
            return False
        message.available_at = self.store.now() + max(0.0, delay_seconds)
        message.ready_at = message.available_at
        message.held = False
        if not counted:
            message.handbacks += 1
        message.held_handbacks = message.held_handbacks + 1 if held else 0
        self._wake(message.topic)
        return True

    async def renew(self, delivery: Delivery) -> bool:
        message = self.held(delivery)
        if message is None:
            return False
        message.available_at = self.store.now() + self._visibility
        return True

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        message = self.held(delivery)
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
        for topic in out:
            # a held message's available_at is its visibility deadline (as in ``_claim``)
            out[topic] = sum(1 for m in self._of(topic) if m.available_at <= now)
        return out

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        out = dict.fromkeys(topics, 0)
        now = self.store.now()
        for topic in out:
            # a held message whose visibility deadline passed is due again (as in ``_claim``)
            out[topic] = sum(1 for m in self._of(topic) if m.held and m.available_at > now)
        return out

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        out = dict.fromkeys(topics, 0)
        now = self.store.now()
        for topic in out:
            # a held message's available_at is its visibility deadline, not a delay
            out[topic] = sum(
                1 for m in self._of(topic) if not m.held and now < m.available_at <= before
            )
        return out

    def _of(self, topic: str) -> Iterable[Message]:
        """The messages of ``topic``, in the order of their ids."""
        return self.store.topics.get(topic, {}).values()

    def _wake(self, topic: str) -> None:
        for peer in self._peers():
            for waker, waits_on in peer._wakers.items():
                if waits_on == topic:
                    waker.set()


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
