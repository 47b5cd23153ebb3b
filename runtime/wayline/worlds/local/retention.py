"""Retention of a local world: ended runs deleted, or moved to the archive tables, with
every row that belongs to them (events, hooks, slots, blobs, queued wakes ...)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..._core import clock
from ..._core.events import Event, RunStatus
from ...world import RunInfo, terminal_statuses
from ...world.ports.retention import Retention
from .blobs import archive_blobs, drop_orphans
from .group import GroupWriter
from .rows import check_end, events_from_rows, read_log, run_from_row, run_head


class LocalRetention(Retention):
    def __init__(
        self,
        write: Callable[..., Any],
        read: Callable[..., list[Any]],
        read_together: Callable[..., list[list[Any]]],
        writer: GroupWriter,
        orphan_grace: float,
    ) -> None:
        self._write = write
        self._read = read
        self._read_together = read_together
        self._writer = writer
        self._orphan_grace = orphan_grace

    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        chosen = terminal_statuses(statuses)
        cutoff = clock.now() - max(0.0, older_than)

        orphaned = clock.now() - self._orphan_grace

        def tx(db: sqlite3.Connection) -> int:
            ids = _ended_before(db, cutoff, chosen, None)
            _drop_runs(db, ids)
            drop_orphans(db, orphaned)
            return len(ids)

        deleted: int = self._write(tx)
        self._writer.forget()
        return deleted

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        cutoff = clock.now() - max(0.0, older_than)
        batch = max(1, min(1000, limit))

        def tx(db: sqlite3.Connection) -> int:
            ids = _ended_before(db, cutoff, terminal_statuses(None), batch)
            marks = ",".join("?" * len(ids))
            if ids:
                db.execute(
                    f"INSERT INTO runs_archive SELECT * FROM runs WHERE run_id IN ({marks})", ids
                )
                db.execute(
                    f"INSERT INTO events_archive SELECT * FROM events WHERE run_id IN ({marks})",
                    ids,
                )
                archive_blobs(db, ids)
                _drop_runs(db, ids)
            return len(ids)

        moved: int = self._write(tx)
        self._writer.forget()
        return moved

    async def archived_count(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM runs_archive")[0][0])

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        """From ``runs_archive`` and ``events_archive``; an id archived again after it was
        started anew has a row per run, and the latest run's events are those written since
        it was created (the one before ended earlier)."""
        heads, rows = self._read_together(
            (
                # the shape RUN_SELECT reads, with the archive's own highest event
                "SELECT runs_archive.*, (SELECT MAX(seq) FROM events_archive AS e "
                "WHERE e.run_id = runs_archive.run_id AND e.created_at >= runs_archive.created_at) "
                "FROM runs_archive WHERE run_id = ? ORDER BY created_at DESC LIMIT 1",
                (run_id,),
            ),
            (
                "SELECT seq, type, cid, data, created_at FROM events_archive WHERE run_id = ? "
                "AND created_at >= (SELECT MAX(created_at) FROM runs_archive WHERE run_id = ?) "
                "ORDER BY seq",
                (run_id, run_id),
            ),
        )
        if not heads:
            return None
        info = run_from_row(heads[0])
        return info, read_log(run_id, rows, info.last_seq)

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        """The page's rows alone, a range of ``events_archive_by_run``: the latest run
        archived under the id (its rows are those written since it was created, as
        :meth:`archived_run` takes them), checked as a live page's rows are."""
        after = max(0, after_seq)
        heads, rows = self._read_together(
            (
                "SELECT status, last_seq FROM runs_archive WHERE run_id = ? "
                "ORDER BY created_at DESC LIMIT 1",
                (run_id,),
            ),
            (
                "SELECT seq, type, cid, data, created_at FROM events_archive WHERE run_id = ? "
                "AND seq > ? AND created_at >= (SELECT MAX(created_at) FROM runs_archive "
                "WHERE run_id = ?) ORDER BY seq LIMIT ?",
                (run_id, after, run_id, max(0, limit)),
            ),
        )
        if not heads:
            return None
        # read as untrusted, as ``archived_run`` reads the row: a last seq Wayline never
        # writes is CorruptLogError (a 409), not a ValueError or TypeError (a 500)
        _, last = run_head(run_id, (heads[0][0], heads[0][1]))
        events = events_from_rows(run_id, rows, after, last)
        check_end(run_id, after + len(events), min(last, after + max(0, limit)))
        return last, events


def _ended_before(
    db: sqlite3.Connection, cutoff: float, statuses: list[str], limit: int | None
) -> list[str]:
    marks = ",".join("?" * len(statuses))
    sql = (
        f"SELECT run_id FROM runs WHERE status IN ({marks}) AND ended_at <= ? "
        "ORDER BY ended_at, run_id"
    )
    params: list[Any] = [*statuses, cutoff]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [r[0] for r in db.execute(sql, params).fetchall()]


def _drop_runs(db: sqlite3.Connection, ids: list[str]) -> None:
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    tables = (
        "events",
        "entities",
        "hooks",
        "runs",
        "run_feed",
        "stream_records",
        "slots",
        "blobs",
        "run_attributes",
    )
    for table in tables:
        db.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids)
    # queued wakes for those runs (a backstop due in 14 minutes, say) go with them
    db.execute(
        f"DELETE FROM messages WHERE json_extract(CAST(payload AS TEXT), '$.runId') IN ({marks})",
        ids,
    )
