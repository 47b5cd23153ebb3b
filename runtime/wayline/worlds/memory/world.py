"""``MemoryWorld``: the World contract on a :class:`~.store.MemoryStore`.

Several worlds opened on one store behave as several processes on one database: each has its
own single-flight and terminal waiters (``World``), and they share the log, the queue and the
slots. Every wait is an ``asyncio`` wait, so on the simulator's loop (``wayline.sim``) the
whole world runs on virtual time. Large payloads stay inline: nothing here has a size limit.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence

from ..._core import ordering, search_attributes
from ..._core.events import RUN_TERMINAL_EVENTS, Event, NewEvent, RunStatus
from ..._core.search_attributes import Where
from ...settings import Settings
from ...world import (
    HookInfo,
    RunInfo,
    RunWatch,
    World,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, orphan_grace
from ...world.part_forwarding import ForwardsToParts, ForwardsToQueue
from ...world.ports.blobs import BlobRef
from .blobs import MemoryBlobs
from .hook_buffer import MemoryHookBuffer
from .queue import MemoryQueue
from .rate_buckets import MemoryRateBuckets
from .registry import MemoryRegistry
from .retention import MemoryRetention
from .slots import MemorySlots
from .store import MemoryStore
from .streams import MemoryStreams


class MemoryWorld(ForwardsToParts, ForwardsToQueue, World):
    _queue: MemoryQueue
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
        self._queue = MemoryQueue(
            self.store,
            visibility=visibility_seconds,
            aging=aging_seconds,
            peers=lambda: [w._queue for w in self._peers()],
        )
        self._served = MemoryRegistry(self.store)
        self._streams = MemoryStreams(self.store)
        self._slots = MemorySlots(self.store)
        self._rates = MemoryRateBuckets(self.store)
        self._retention = MemoryRetention(self.store, self._orphan_grace)
        self._blobs = MemoryBlobs(self.store)
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

    # blobs (``blobs``) --------------------------------------------------------------------
    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        return await self._blobs.put_blob(run_id, data)

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        return await self._blobs.get_blob(run_id, ref)

    # payload_blob: the port's default (None), as every payload here is inline
