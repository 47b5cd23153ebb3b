"""Group commit: the appends of every run in this process that are waiting at the same moment go
into one transaction, so one commit (one fsync, under ``synchronous=FULL``) serves them all.

A lone writer (nothing queued, no other append in this turn of the event loop, and the last
flush served one request) commits at once, inline: deferring it would gather nobody and cost
a future and two loop turns. An append that comes in the same loop turn as another, or
while flushes serve several requests, is concurrent: it queues its request and awaits it; the
first request of a batch schedules the flush with ``call_soon``, so everything queued until
the event loop comes round to it (the other runs' handlers, woken by the previous flush) is
written by one ``BEGIN IMMEDIATE`` ... ``COMMIT``. Each request is planned and
validated on its own (``appends``): its conflict or bad row is its own error, and its
statements are taken back (or were never written) without touching the others in the batch.
Only a failure of the transaction itself (the database locked past ``busy_timeout``, a disk
error, the commit) fails every request of the batch, and then nothing of the batch is written.
A queued request whose caller was cancelled before the flush is not written (an inline one is
written before its caller can be cancelled).

The writes run on the event loop's thread, as every call of this world does (see
``world``): the batch is what the loop gathered while the previous one was committing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..._core import clock
from ..._core.events import Event, NewEvent
from ...errors import WaylineError
from .appends import Head, advance, plan, read_head, write
from .failures import rollback
from .feed import followed

_CACHED_RUNS = 10_000
"""Heads kept (a cache, not a store): past this the cache starts again empty."""


@dataclass(slots=True)
class _Request:
    run_id: str
    events: Sequence[NewEvent]
    expected_seq: int | None
    future: asyncio.Future[list[Event]] | None = None
    """Set for a request queued for the flush; an inline one has none."""


class GroupWriter:
    def __init__(
        self,
        conn: Callable[[], sqlite3.Connection],
        unavailable: Callable[[BaseException], Exception],
        on_feed: Callable[[list[int]], None] = lambda gseqs: None,
    ) -> None:
        self._conn = conn
        self._unavailable = unavailable
        self._on_feed = on_feed
        """Told the change feed's numbers each commit wrote (``feed.Ends.written``)."""
        self._pending: list[_Request] = []
        self._heads: dict[str, Head] = {}
        self._turn_busy = False
        """An append was made in this turn of the event loop (cleared at the next turn)."""
        self._grouping = False
        """The last flush served more than one request: appends are concurrent now, and each
        wave of them (the handlers its commit woke) is gathered whole, none sent ahead."""
        self.commits = 0
        """Transactions this writer committed (a counter for tests and benchmarks)."""

    def forget(self, run_ids: Sequence[str] | None = None) -> None:
        """Drop cached heads (all of them when ``run_ids`` is None): the next append reads."""
        if run_ids is None:
            self._heads.clear()
        for run_id in run_ids or ():
            self._heads.pop(run_id, None)

    async def append(
        self, run_id: str, events: Sequence[NewEvent], expected_seq: int | None
    ) -> list[Event]:
        loop = asyncio.get_running_loop()
        if not self._pending and not self._turn_busy and not self._grouping:
            # A lone writer: nothing is queued, no other append came in this turn of the loop
            # and the last flush served one request, so a deferred flush would gather nobody
            # else; it commits at once, without a future and the two loop turns of its round
            # trip. An append that comes later in this same turn is concurrent with it and is
            # queued for one grouped flush. While flushes serve several requests, the first
            # append of each wave is queued too: sent ahead alone it would cost a commit (an
            # fsync under synchronous=FULL) of its own.
            self._turn_busy = True
            loop.call_soon(self._turn_over)
            outcome = self._commit([_Request(run_id, events, expected_seq)])[0]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        request = _Request(run_id, events, expected_seq, loop.create_future())
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append(request)
        assert request.future is not None
        return await request.future

    def _turn_over(self) -> None:
        self._turn_busy = False

    def _flush(self) -> None:
        batch = [r for r in self._pending if r.future is not None and not r.future.done()]
        self._pending = []
        self._grouping = len(batch) > 1
        if not batch:
            return
        try:
            outcomes = self._commit(batch)
        except BaseException:
            for request in batch:
                if request.future is not None and not request.future.done():
                    request.future.set_exception(asyncio.CancelledError())
            raise
        for request, outcome in zip(batch, outcomes, strict=True):
            if request.future is None or request.future.done():
                continue
            if isinstance(outcome, BaseException):
                request.future.set_exception(outcome)
            else:
                request.future.set_result(outcome)

    def _commit(self, batch: list[_Request]) -> list[list[Event] | Exception]:
        """The batch in one transaction: each request's events or its own error. A failure of
        the transaction itself fails every request with it (nothing of the batch written); a
        ``BaseException`` that is not an ``Exception`` is raised, after the rollback."""
        try:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, WaylineError) as err:
            return self._failed(batch, err)
        outcomes: list[list[Event] | Exception] = []
        try:
            now = clock.now()
            moved: list[str] = []
            outcomes = [self._one(db, r, now, moved) for r in batch]
            written = {
                r.run_id: None for r, o in zip(batch, outcomes, strict=True) if isinstance(o, list)
            }
            # the look for a follower is spared when every run written is renumbered anyway
            if len(set(moved)) < len(written) and followed(db):
                moved = list(written)
            gseqs = _touch_feed(db, list(dict.fromkeys(moved)))
            db.execute("COMMIT")
        except BaseException as err:
            # every request of the batch is failed, none told it was written: on a full disk
            # SQLite may have rolled the transaction back itself (``failures.rollback``)
            rollback(db)
            if not isinstance(err, Exception):
                self.forget([r.run_id for r in batch])
                raise
            return self._failed(batch, err)
        self.commits += 1
        if gseqs:
            self._on_feed(gseqs)
        return outcomes

    def _one(
        self, db: sqlite3.Connection, r: _Request, now: float, moved: list[str]
    ) -> list[Event] | Exception:
        """One request inside the batch's transaction: its events, or its own error (nothing
        of it written). A failure of the transaction itself is raised. A written append that
        changed the run's status adds the run to ``moved`` (for the change feed)."""
        head = self._heads.get(r.run_id)
        verified = head is None or (r.expected_seq is not None and r.expected_seq != head.last_seq)
        if verified:
            head = read_head(db, r.run_id)
        for _ in range(2):
            assert head is not None
            try:
                p = plan(r.run_id, head, r.events, r.expected_seq, now)
                done = write(db, p, verified)
            except sqlite3.Error:
                raise
            except WaylineError as err:
                if verified:
                    self._heads.pop(r.run_id, None)
                    return err
                done = False  # judged on a cached head: judge again on the stored one
            except Exception as err:  # the append's own data (not JSON, say): nothing written
                self._heads.pop(r.run_id, None)
                return err
            if done:
                if p.status is not p.head.status:
                    moved.append(r.run_id)
                self._keep(r.run_id, advance(p))
                return p.events
            head, verified = read_head(db, r.run_id), True
        raise AssertionError("an append planned on a head read in its transaction was refused")

    def _keep(self, run_id: str, head: Head) -> None:
        if head.status is None or head.status.terminal:
            self._heads.pop(run_id, None)
            return
        if run_id not in self._heads and len(self._heads) >= _CACHED_RUNS:
            self._heads.clear()
        self._heads[run_id] = head

    def _failed(self, batch: list[_Request], err: Exception) -> list[list[Event] | Exception]:
        self.forget([r.run_id for r in batch])
        failure = self._unavailable(err) if isinstance(err, sqlite3.Error) else err
        return [failure] * len(batch)


def _touch_feed(db: sqlite3.Connection, run_ids: list[str]) -> list[int]:
    """Renumber the runs' rows in the change feed (``feed``), one statement per batch, and
    return their new numbers."""
    gseqs: list[int] = []
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        gseqs += [
            int(row[0])
            for row in db.execute(
                "INSERT OR REPLACE INTO run_feed (run_id) VALUES "
                + ",".join(["(?)"] * len(chunk))
                + " RETURNING gseq",
                chunk,
            )
        ]
    return gseqs
