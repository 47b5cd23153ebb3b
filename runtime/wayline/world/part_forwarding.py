"""The forwarding a world does to the parts that keep six of its ports, written once.

The local and memory worlds each keep their registry, step streams, slots, rate buckets,
retention and queue in a part of their own, one part a port (``worlds/local/registry.py``,
``worlds/memory/registry.py`` ...), and the world's methods for those ports only pass the call
on. :class:`ForwardsToParts` is those methods for the first five: a world lists it before
:class:`World` and sets the five attributes to its parts, each an instance of its port, so
``mypy --strict`` checks each call against the port's own signature. :class:`ForwardsToQueue`
does the same for the queue: the world sets ``_queue`` to its queue part, which is no
:class:`WorkQueue` but has :class:`QueuePart`'s methods, and routes an enqueued message's topic
before passing it on. The NATS world makes its parts lazily, once it is connected, and their
methods are named otherwise, so it uses neither."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .._core.events import Event, RunStatus
from .._core.ids import MessageId
from .._core.projections import RunInfo
from .ports import (
    Delivery,
    QueueDepth,
    RateBuckets,
    Registry,
    Retention,
    Slots,
    Streams,
    WorkQueue,
)
from .routing import Router


class ForwardsToParts(Registry, Streams, Slots, RateBuckets, Retention, abc.ABC):
    """The registry, step stream, slot, rate bucket and retention ports, each passed on to
    the part that keeps it. ``abc.ABC`` comes last, as in :class:`World`'s bases, so that a
    world that lists this class before ``World`` has one order of its bases."""

    _served: Registry
    _streams: Streams
    _slots: Slots
    _rates: RateBuckets
    _retention: Retention

    # workers (``registry``) ---------------------------------------------------------------
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        await self._served.record_served(entries)

    async def list_served(self) -> list[dict[str, Any]]:
        return await self._served.list_served()

    # step streams (``streams``) -----------------------------------------------------------
    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        await self._streams.write_stream(run_id, stream, records)

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        return await self._streams.read_stream(run_id, stream, start, limit)

    # concurrency slots (``slots``) --------------------------------------------------------
    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        return await self._slots.acquire_slot(key, holder, limit, lease=lease, token=token)

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        return await self._slots.renew_slot(key, holder, lease=lease, token=token)

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        await self._slots.release_slot(key, holder, token=token)

    # rate limits (``rate_buckets``) -------------------------------------------------------
    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        return await self._rates.take_token(key, per_second, burst, holder)

    # retention (``retention``) ------------------------------------------------------------
    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        return await self._retention.delete_runs(older_than=older_than, statuses=statuses)

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        return await self._retention.archive_runs(older_than=older_than, limit=limit)

    async def archived_count(self) -> int:
        return await self._retention.archived_count()

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        return await self._retention.archived_run(run_id)

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        return await self._retention.archived_page(run_id, after_seq, limit)


class QueuePart(Protocol):
    """What a world's queue part (``worlds/local/queue.py``, ``worlds/memory/queue.py``) does
    for the world's queue port: the port's calls, each on a topic already routed."""

    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = ...,
        delay_seconds: float = ...,
        recoverable: bool = ...,
    ) -> MessageId: ...
    async def receive(
        self, topic: str, *, max_messages: int = ..., wait_seconds: float = ...
    ) -> list[Delivery]: ...
    async def ack(self, delivery: Delivery) -> bool: ...
    async def retry(self, delivery: Delivery, delay_seconds: float = ...) -> bool: ...
    async def release(
        self, delivery: Delivery, delay_seconds: float = ..., *, held: bool = ...
    ) -> bool: ...
    async def cancel_delayed(self, message_id: MessageId) -> bool: ...
    async def renew(self, delivery: Delivery) -> bool: ...
    async def dead_letter(self, delivery: Delivery, reason: str) -> bool: ...
    async def list_dead_letters(self, limit: int = ...) -> list[dict[str, Any]]: ...
    async def runs_with_messages(self) -> set[str] | None: ...
    async def queue_depths(self) -> list[QueueDepth] | None: ...
    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]: ...
    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]: ...
    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]: ...


class ForwardsToQueue(WorkQueue, abc.ABC):
    """The queue port, passed on to the world's queue part once :attr:`router` has routed an
    enqueued message's topic (the local and memory worlds; the NATS world keeps its own)."""

    _queue: QueuePart
    router: Router

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
        return await self._queue.enqueue(
            topic,
            payload,
            idempotency_key=idempotency_key,
            delay_seconds=delay_seconds,
            recoverable=recoverable,
        )

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        return await self._queue.receive(
            topic, max_messages=max_messages, wait_seconds=wait_seconds
        )

    async def ack(self, delivery: Delivery) -> bool:
        return await self._queue.ack(delivery)

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return await self._queue.retry(delivery, delay_seconds)

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        return await self._queue.release(delivery, delay_seconds, held=held)

    async def cancel_delayed(self, message_id: MessageId) -> bool:
        return await self._queue.cancel_delayed(message_id)

    async def renew(self, delivery: Delivery) -> bool:
        return await self._queue.renew(delivery)

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        return await self._queue.dead_letter(delivery, reason)

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return await self._queue.list_dead_letters(limit)

    async def runs_with_messages(self) -> set[str] | None:
        return await self._queue.runs_with_messages()

    async def queue_depths(self) -> list[QueueDepth] | None:
        return await self._queue.queue_depths()

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        return await self._queue.ready_messages(topics)

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        return await self._queue.in_flight_messages(topics)

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        return await self._queue.delayed_messages(topics, before)
