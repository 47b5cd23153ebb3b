"""Payloads sent before the wait on SQLite: the ``hook_buffer`` table, one row per
``(namespace, token)`` holding the entry's JSON (``wayline.world.hook_buffer``).

Every change reads the row and writes it back in one ``BEGIN IMMEDIATE`` transaction, so SQLite's
one writer at a time makes a store or a take atomic: of two racing takers, the second reads the
row the first left taken. A row whose ``data`` is not an entry (bytes Wayline did not write) is
passed over with a log line and replaced by the next store for its key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..._core import clock
from ...world.hook_buffer import BufferedPayload, HookBuffer, read_entry, to_store, to_take


def _row(db: sqlite3.Connection, namespace: str, token: str) -> BufferedPayload | None:
    found = db.execute(
        "SELECT data FROM hook_buffer WHERE namespace = ? AND token = ?", (namespace, token)
    ).fetchone()
    return None if found is None else read_entry(found[0], f"{namespace!r}/{token!r}")


def _put(db: sqlite3.Connection, entry: BufferedPayload) -> None:
    db.execute(
        "INSERT OR REPLACE INTO hook_buffer (namespace, token, data, expires_at) VALUES (?,?,?,?)",
        (entry.namespace, entry.token, json.dumps(entry.to_json()), entry.expires_at),
    )


class LocalHookBuffer(HookBuffer):
    def __init__(
        self,
        write: Callable[..., Any],
        read: Callable[[str, Sequence[Any]], list[Any]],
    ) -> None:
        self._write = write
        self._read = read

    async def store(self, entry: BufferedPayload) -> BufferedPayload:
        def tx(db: sqlite3.Connection) -> BufferedPayload:
            # every store sweeps: the table holds only what waits, and one DELETE is cheap
            db.execute("DELETE FROM hook_buffer WHERE expires_at <= ?", (clock.now(),))
            existing = _row(db, entry.namespace, entry.token)
            if not to_store(existing, entry, clock.now()):
                assert existing is not None
                return existing
            _put(db, entry)
            return entry

        stored: BufferedPayload = self._write(tx)
        return stored

    async def get(self, namespace: str, token: str) -> BufferedPayload | None:
        rows = self._read(
            "SELECT data FROM hook_buffer WHERE namespace = ? AND token = ?", (namespace, token)
        )
        return read_entry(rows[0][0], f"{namespace!r}/{token!r}") if rows else None

    async def take(self, namespace: str, token: str, run_id: str) -> BufferedPayload | None:
        if not self._read(
            "SELECT 1 FROM hook_buffer WHERE namespace = ? AND token = ?", (namespace, token)
        ):
            return None  # the common case, a hook nobody sent to early: no write transaction

        def tx(db: sqlite3.Connection) -> BufferedPayload | None:
            taken = to_take(_row(db, namespace, token), run_id, clock.now())
            if taken is not None:
                _put(db, taken)
            return taken

        result: BufferedPayload | None = self._write(tx)
        return result

    async def give_back(self, entry: BufferedPayload) -> None:
        def tx(db: sqlite3.Connection) -> None:
            if _row(db, entry.namespace, entry.token) == entry:
                _put(db, replace(entry, taken_by=None))

        self._write(tx)

    async def sweep(self) -> int:
        def tx(db: sqlite3.Connection) -> int:
            return db.execute(
                "DELETE FROM hook_buffer WHERE expires_at <= ?", (clock.now(),)
            ).rowcount

        swept: int = self._write(tx)
        return swept
