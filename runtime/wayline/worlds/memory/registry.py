"""The workers' registry of a memory world: the store's served entries, merged as every world
merges them (``wayline.world.registry``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...world.registry import merge_served
from .store import MemoryStore


class MemoryRegistry:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        for entry in entries:
            key = str(entry["key"])
            merged = merge_served(self.store.served.get(key), entry)
            if merged is not None:
                self.store.served[key] = json.loads(json.dumps(merged))

    async def list_served(self) -> list[dict[str, Any]]:
        return [dict(self.store.served[k]) for k in sorted(self.store.served)]
