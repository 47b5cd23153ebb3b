"""The workers' registry of a local world: the ``served`` table, an entry a served key,
merged as every world merges them (``wayline.world.registry``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...world.ports.registry import Registry
from ...world.registry import merge_served


class LocalRegistry(Registry):
    def __init__(self, write: Callable[..., Any], read: Callable[..., list[Any]]) -> None:
        self._write = write
        self._read = read

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        def tx(db: sqlite3.Connection) -> None:
            for e in entries:
                key = str(e["key"])
                row = db.execute("SELECT data FROM served WHERE key = ?", (key,)).fetchone()
                try:
                    stored = json.loads(row[0]) if row is not None else None
                except ValueError:
                    stored = None
                merged = merge_served(stored if isinstance(stored, dict) else None, e)
                if merged is None:
                    continue
                db.execute(
                    "INSERT INTO served (key, data) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET data = excluded.data",
                    (key, json.dumps(merged)),
                )

        self._write(tx)

    async def list_served(self) -> list[dict[str, Any]]:
        return [json.loads(r[0]) for r in self._read("SELECT data FROM served ORDER BY key")]
