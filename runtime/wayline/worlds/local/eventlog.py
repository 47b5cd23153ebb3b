"""The event log of a local world: a run's events, its row in ``runs`` and the lists and
counts of runs, and the hooks table. Appends are written by ``group`` (several runs in one
commit); this module reads, lists and repairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..._core.events import HOOK_ACTIVE, Event, RunStatus
from ..._core.search_attributes import Where
from ...errors import CorruptEntryError, CorruptLogError
from ...world import HookInfo, RunInfo, entries
from ...world.blobs import OutOfLine
from . import attribute_index
from .group import GroupWriter
from .rows import (
    LIVE_HOOK,
    RUN_SELECT,
    check_end,
    events_from_rows,
    read_log,
    repair_tx,
    run_from_row,
)


class LocalEventLog:
    def __init__(
        self,
        write: Callable[..., Any],
        read: Callable[..., list[Any]],
        read_together: Callable[..., list[list[Any]]],
        blobs: OutOfLine,
        writer: GroupWriter,
    ) -> None:
        self._write = write
        self._read = read
        self._read_together = read_together
        self.blobs = blobs
        self._writer = writer

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self.blobs.resolve(run_id, await self.stored_events(run_id, after_seq))

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """Rows that end before the run's ``last_seq`` fence it (``rows.check_end``); a suffix
        that is empty because nothing was appended after ``after_seq`` does not."""
        rows, head = self._read_together(
            (
                "SELECT seq, type, cid, data, created_at FROM events "
                "WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after_seq),
            ),
            ("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)),
        )
        last = head[0][0] if head else 0
        if not rows and after_seq <= 0 and not last:
            return []  # no run (a run whose every row was deleted is fenced by ``read_log``)
        if after_seq <= 0:
            events = read_log(run_id, rows, last)
        else:
            events = events_from_rows(run_id, rows, after_seq, last)
            check_end(run_id, after_seq + len(events), last)
        return events

    async def events_page(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        """The page's rows alone (``LIMIT``), each checked as :meth:`stored_events` checks the
        log's rows, and fenced by the run's ``last_seq`` up to the page's end."""
        if limit <= 0:
            return []
        after = max(0, after_seq)
        rows, head = self._read_together(
            (
                "SELECT seq, type, cid, data, created_at FROM events "
                "WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, after, limit),
            ),
            ("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)),
        )
        last = head[0][0] if head else 0
        events = events_from_rows(run_id, rows, after, last)
        if isinstance(last, int):  # rows deleted behind the world's back, inside the page
            check_end(run_id, after + len(events), min(last, after + limit))
        return await self.blobs.resolve(run_id, events)

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self.blobs.resolve_info(self.stored_run(run_id))

    def stored_run(self, run_id: str) -> RunInfo | None:
        """The run's view as stored: a large input or output is still its reference."""
        rows = self._read(f"SELECT {RUN_SELECT} FROM runs WHERE run_id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        """Remove the event row ``drop_seq`` (later rows move down one, so the log stays
        dense; where rows were deleted behind the world's back, in the log or at its end,
        close that gap instead, and remove a row written past the run's end), then rebuild
        the run's row and entity statuses from its events. Refused, with nothing changed,
        unless reading the log first fails at that row (it does not decode, does not follow
        from the rows before it, or is missing). When the rest of the log does not read
        either, the removal stands and the next bad row's error is raised, as on NATS."""
        result: tuple[list[str], CorruptLogError | None] = self._write(repair_tx, run_id, drop_seq)
        self._writer.forget([run_id])
        done, next_bad = result
        if next_bad is not None:
            raise next_bad
        return done

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        if status is RunStatus.CORRUPT:
            every = await self.list_runs(
                workflow=workflow, limit=1_000_000, where=where, since=since
            )
            return [i for i in every if i.status is RunStatus.CORRUPT][:limit]
        sql, params = _runs_where(_listed(where), status, workflow, where)
        if since is not None:
            sql += " AND created_at >= ?"
            params.append(since)
        return self._run_rows(sql, params, limit, by_id=bool(where))

    async def runs_page(
        self,
        *,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None = None,
        workflow: str | None = None,
        where: Sequence[Where] = (),
    ) -> list[RunInfo]:
        sql, params = _runs_where(_listed(where), status, workflow, where)
        if after is not None:
            # keyset: the (created_at, run_id) index walks on from the cursor, so a deep
            # page reads as few rows as the first one (an OFFSET would read every row before)
            sql += " AND (runs.created_at < ? OR (runs.created_at = ? AND runs.run_id > ?))"
            params += [after[0], after[0], after[1]]
        return self._run_rows(sql, params, limit, by_id=bool(where))

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        sql, params = _runs_where("status, COUNT(*)", None, workflow, where)
        counts: dict[RunStatus, int] = {}
        for status, count in self._read(sql + " GROUP BY status", params):
            try:
                counts[RunStatus(status)] = int(count)
            except ValueError:  # a row written behind the world's back: its log says
                counts[RunStatus.CORRUPT] = counts.get(RunStatus.CORRUPT, 0) + int(count)
        return counts

    def _run_rows(
        self, sql: str, params: list[Any], limit: int, *, by_id: bool = False
    ) -> list[RunInfo]:
        """The runs ``sql`` selects, newest first, at most ``limit``. ``by_id``: ``sql``
        selects run ids only (``_listed``), which are sorted and cut to the limit before any
        run's row is read: a search attribute matching a thousand runs then reads the rows
        and the last sequences of a page of them, not of all (EXPLAIN QUERY PLAN in
        bench/RESULTS.md, "The console's runs page")."""
        order = " ORDER BY created_at DESC, run_id"
        if by_id:
            inner = " ORDER BY runs.created_at DESC, runs.run_id LIMIT ?"
            sql = f"SELECT {RUN_SELECT} FROM runs WHERE run_id IN ({sql}{inner}){order}"
        else:
            sql += f"{order} LIMIT ?"
        out: list[RunInfo] = []
        for row in self._read(sql, [*params, limit]):
            try:
                out.append(run_from_row(row))
            except CorruptLogError as err:
                out.append(entries.corrupt_info(str(row[0]), err))
        return out

    async def runs_mark(self) -> int | None:
        # The change feed's row of a run is renumbered by every append that creates it or
        # changes its status (``feed``), and AUTOINCREMENT keeps the numbers rising.
        rows = self._read("SELECT seq FROM sqlite_sequence WHERE name = 'run_feed'")
        return int(rows[0][0]) if rows else 0

    async def get_hook(self, token: str) -> HookInfo | None:
        rows = self._read(
            "SELECT token, run_id, cid, active FROM hooks WHERE token = ? "
            "ORDER BY active DESC, created_at DESC LIMIT 1",
            (token,),
        )
        if not rows:
            return None
        r = rows[0]
        if not all(isinstance(v, str) for v in r[:3]) or not isinstance(r[3], int):
            raise CorruptEntryError(
                f"hook token {token!r}: its row in the hooks table is unreadable",
                store="hooks table",
                key=token,
                why="a column of the wrong type",
            )
        if r[3] and not self._read(LIVE_HOOK, (r[1], r[2], HOOK_ACTIVE)):
            return None  # a row no hook of the log stands behind (written behind our back)
        return HookInfo(r[0], r[1], r[2], bool(r[3]))


def _listed(where: Sequence[Where]) -> str:
    """What a list selects before ``_run_rows``: the run ids alone under a search attribute
    filter (their rows are read for the page only), else the rows."""
    return "runs.run_id" if where else RUN_SELECT


def _runs_where(
    select: str, status: RunStatus | None, workflow: str | None, where: Sequence[Where]
) -> tuple[str, list[Any]]:
    """``SELECT select FROM runs`` narrowed by status, workflow and search attributes (from
    the attribute index), open to more ``AND`` clauses."""
    sql, params = f"SELECT {select} FROM runs WHERE 1=1", list[Any]()
    if where:
        sql, params = attribute_index.query(where, select)
    if status is not None:
        sql += " AND status = ?"
        params.append(str(status))
    if workflow is not None:
        sql += " AND workflow = ?"
        params.append(workflow)
    return sql, params
