"""Retention of a memory world: ended runs deleted or archived (counted) with what goes with
them (``MemoryStore.drop_runs``), and orphan blobs older than the grace."""

from __future__ import annotations

from collections.abc import Sequence

from ..._core.events import RunStatus
from ...world import terminal_statuses
from ...world.ports.retention import Retention
from .store import MemoryStore


class MemoryRetention(Retention):
    def __init__(self, store: MemoryStore, orphan_grace: float) -> None:
        self.store = store
        self._orphan_grace = orphan_grace

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
