"""Concurrency slots of a local world: the ``slots`` table, a row a holder of a key. A holder
without a lease (a run) is dropped once its run has ended or is gone; a leased one (a step)
once its lease ran out."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..._core import clock
from ...world import terminal_statuses
from ...world.ports.slots import Slots

_SAME_TAKE = "(token IS NULL OR ? IS NULL OR token = ?)"
"""A renewal or give-back acts on the take that holds the slot now (its ``token``), not on an
older take of the same holder: a stale attempt whose redelivery took the step's slot again.
A row from before tokens (NULL), or a caller without one, matches any."""


class LocalSlots(Slots):
    def __init__(self, write: Callable[..., Any]) -> None:
        self._write = write

    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        ended = terminal_statuses(None)

        def tx(db: sqlite3.Connection) -> tuple[bool, list[str]]:
            now = clock.now()
            marks = ",".join("?" * len(ended))
            # holders whose runs ended (or were deleted), or whose leases ran out, free slots
            db.execute(
                "DELETE FROM slots WHERE key = ? AND (expires_at <= ? OR (expires_at IS NULL "
                f"AND run_id NOT IN (SELECT run_id FROM runs WHERE status NOT IN ({marks}))))",
                (key, now, *ended),
            )
            holders = [
                r[0]
                for r in db.execute(
                    "SELECT run_id FROM slots WHERE key = ? ORDER BY acquired_at, run_id", (key,)
                ).fetchall()
            ]
            until = None if lease is None else now + lease
            if holder in holders:
                if until is not None:  # taken again: the lease and the take's token are new
                    db.execute(
                        "UPDATE slots SET expires_at = ?, token = ? WHERE key = ? AND run_id = ?",
                        (until, token, key, holder),
                    )
                return True, holders
            if len(holders) >= limit:
                return False, holders
            db.execute(
                "INSERT INTO slots (key, run_id, acquired_at, expires_at, token) "
                "VALUES (?,?,?,?,?)",
                (key, holder, now, until, token if until is not None else None),
            )
            return True, [*holders, holder]

        result: tuple[bool, list[str]] = self._write(tx)
        return result

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        def tx(db: sqlite3.Connection) -> bool:
            now = clock.now()
            renewed = db.execute(
                "UPDATE slots SET expires_at = ? WHERE key = ? AND run_id = ? AND expires_at > ? "
                f"AND {_SAME_TAKE}",
                (now + lease, key, holder, now, token, token),
            )
            return renewed.rowcount == 1

        kept: bool = self._write(tx)
        return kept

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        def tx(db: sqlite3.Connection) -> None:
            db.execute(
                f"DELETE FROM slots WHERE key = ? AND run_id = ? AND {_SAME_TAKE}",
                (key, holder, token, token),
            )

        self._write(tx)
