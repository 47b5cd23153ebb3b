"""Step streams of a memory world: the store's records, a list a run's stream."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...world.ports.streams import Streams
from .store import MemoryStore


class MemoryStreams(Streams):
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

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
