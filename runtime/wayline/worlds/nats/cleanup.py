"""Retention of a NATS world: deleting and archiving ended runs (``retention``), with what goes
with a run (its step streams, its entries in the runs and attribute indexes, its blobs), and
the orphan blobs a start that never appended left behind."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..._core import clock
from ..._core.events import Event, RunStatus
from ...errors import WorldUnavailableError
from ...world import RunInfo
from .connection import Link
from .eventlog import EventLog
from .names import Names, token_value
from .queue import Queue
from .retention import Retention
from .streams import Streams


class NatsCleanup:
    def __init__(
        self,
        link: Link,
        queue: Callable[[], Queue | None],
        events: Callable[[], EventLog],
        streams: Callable[[], Streams],
        blob_store: Callable[[], Any],
        flush: Callable[[], Awaitable[bool]],
        forget: Callable[[str, RunInfo], Awaitable[None]],
        names: Names,
        orphan_grace: float,
    ) -> None:
        self._nc = link.nc
        self._js = link.js
        self._log = link.log
        self._queue = queue
        self._events = events
        """The started world's event log, or its not-started error."""
        self._streams = streams
        self._blob_store = blob_store
        self._flush = flush
        """Waits for this process's runs index entries: one written after its run's purge
        would name no run."""
        self._forget = forget
        """Drops a run from the runs index, the attribute index and the runs in memory."""
        self._names = names
        self._orphan_grace = orphan_grace
        self._url = link.url
        self._servers_shown = link.shown
        self._timeout = link.timeout

    parts: Callable[[], list[tuple[EventLog, Queue]]] | None = None
    """In a world of several partitions: each partition's log and queue, in order."""

    def retention(self) -> Retention:
        """The retention of the first partition (the only one in a world of one): the archive
        is one for every partition."""
        return self.retentions()[0]

    def retentions(self) -> list[Retention]:
        """A retention a partition: each sweeps the runs of its own events stream."""
        log_, queue, nc = self._log(), self._queue(), self._nc()
        if log_ is None or queue is None or nc is None:
            raise WorldUnavailableError(f"world {self._url} is not started (use `async with`)")
        parts = [(log_, queue)] if self.parts is None else self.parts()
        return [
            Retention(
                nc,
                self._js(),
                self._names.partition(part),
                part_log,
                part_queue,
                url=self._servers_shown,
                timeout=self._timeout,
            )
            for part, (part_log, part_queue) in enumerate(parts)
        ]

    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        retentions = self.retentions()
        archive = retentions[0]
        streams, blobs = self._streams(), self._blob_store()
        await self._flush()  # an entry written after its run's purge names no run
        stored = await blobs.names()

        async def drop(info: RunInfo, incarnation: str | None, ended: float) -> None:
            run_id = info.run_id
            await streams.purge_run(run_id)  # its step streams, then its payloads
            await self._forget(run_id, info)
            await blobs.drop(run_id, incarnation, ended, stored, lambda: archive.archived(run_id))

        deleted = 0
        for retention in retentions:
            retention.on_drop = drop
            deleted += await retention.delete_runs(older_than, statuses)
        await self._drop_orphan_blobs()
        return deleted

    async def _drop_orphan_blobs(self) -> None:
        """Delete the blobs of run ids the log does not hold, stored at least the orphan
        grace ago (``wayline.world.blobs.ORPHAN_GRACE_SECONDS``) and not named by the
        archive: a start whose process died between its blob and its append, or whose append
        was refused, left them, and no event will name them. Listed again after the pass's
        deletions, so the blobs those took are not looked at twice."""
        blobs, retention = self._blob_store(), self.retention()
        await blobs.names()
        stale = blobs.stale(clock.now() - self._orphan_grace)
        if not stale:
            return
        live = await self._events().run_tokens()
        for token, names in stale.items():
            run_id = token_value(token)
            if token in live or run_id is None:  # a hashed token: its id is not known here
                continue
            kept = await retention.archived(run_id)
            if kept is not None:  # None: a copy does not read, and may name any of them
                await blobs.purge(run_id, [n for n in names if not kept.names(n)])

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        retentions = self.retentions()
        streams = self._streams()
        await self._flush()  # an entry written after its run's purge names no run

        async def drop(info: RunInfo, incarnation: str | None, ended: float) -> None:
            await streams.purge_run(info.run_id)  # payloads stay: the archived events name them
            await self._forget(info.run_id, info)

        archived = 0
        for retention in retentions:  # ``limit`` is for the whole pass, not a partition
            if archived >= limit:
                break
            retention.on_drop = drop
            archived += await retention.archive_runs(older_than, limit - archived)
        return archived

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        return await self.retention().archived_run(run_id)

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        return await self.retention().archived_page(run_id, after_seq, limit)

    async def archived_count(self) -> int:
        return await self.retention().archived_count()
