"""Step streams of a local world: the ``stream_records`` table, a row a record, numbered
densely per run and stream."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...world.ports.streams import Streams


class LocalStreams(Streams):
    def __init__(self, write: Callable[..., Any], read: Callable[..., list[Any]]) -> None:
        self._write = write
        self._read = read

    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        def tx(db: sqlite3.Connection) -> None:
            row = db.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM stream_records WHERE run_id = ? "
                "AND stream = ?",
                (run_id, stream),
            ).fetchone()
            idx = int(row[0])
            for record in records:
                db.execute(
                    "INSERT INTO stream_records (run_id, stream, idx, record) VALUES (?,?,?,?)",
                    (run_id, stream, idx, json.dumps(dict(record))),
                )
                idx += 1

        self._write(tx)

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT record FROM stream_records WHERE run_id = ? AND stream = ? AND idx >= ? "
            "ORDER BY idx LIMIT ?",
            (run_id, stream, max(0, start), max(1, limit)),
        )
        return [json.loads(r[0]) for r in rows]
