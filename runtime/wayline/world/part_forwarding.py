"""The forwarding a world does to the parts that keep five of its ports, written once.

The local and memory worlds each keep their registry, step streams, slots, rate buckets and
retention in a part of their own, one part a port (``worlds/local/registry.py``,
``worlds/memory/registry.py`` ...), and the world's methods for those ports only pass the call
on. :class:`ForwardsToParts` is those methods: a world lists it before :class:`World` and sets
the five attributes to its parts, each an instance of its port, so ``mypy --strict`` checks
each call against the port's own signature. The NATS world makes its parts lazily, once it
is connected, and their methods are named otherwise, so it does not use it."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.events import Event, RunStatus
from .._core.projections import RunInfo
from .ports import RateBuckets, Registry, Retention, Slots, Streams


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
