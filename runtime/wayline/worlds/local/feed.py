"""The embedded world's change feed: an append renumbers its run's row in ``run_feed`` (see
``schema``) when it changes the run's status, and every append does while someone follows them
all; a follower reads the rows above its high-water mark every poll interval and names each run
once per read, however many appends it missed in between. ``Ends`` follows it for the runs that
ended, while someone waits for one: a status change is all it needs, so a step's appends, which
leave the status as it was, write nothing to the feed while nobody follows every append.

A follower of every append (``follow``) says so with a row of ``feed_followers``, written in the
transaction that takes its high-water mark: a writer checks for such a row inside its own
transaction, and writers are serialized, so each append is either below the mark or sees the
row and renumbers its run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ...errors import WorldError
from ...world import RunWatch

log = logging.getLogger("wayline.worlds.local")

_BATCH = 5000
"""Rows per read: a follower far behind catches up in several reads, not one large one."""

Read = Callable[[str, Sequence[Any]], list[Any]]
Write = Callable[[Callable[[sqlite3.Connection], Any]], Any]


async def follow(
    write: Write, read: Read, holder: str, on_change: Callable[[str], None], interval: float
) -> RunWatch:
    """Start following every append from now (the current high-water mark) and return the
    watch; closing it drops its row of ``feed_followers``."""
    follower = f"{holder}:{uuid.uuid4().hex}"

    def register(db: sqlite3.Connection) -> int:
        db.execute(
            "INSERT INTO feed_followers (follower, holder) VALUES (?, ?)", (follower, holder)
        )
        return int(db.execute("SELECT COALESCE(MAX(gseq), 0) FROM run_feed").fetchone()[0])

    mark = write(register)
    task = asyncio.create_task(_poll(read, on_change, interval, mark), name="wayline-run-feed")

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # A row left behind (the world closed first) costs only speed: writers renumber every
        # append until the process's rows are dropped as a dead holder's.
        with contextlib.suppress(WorldError):
            write(
                lambda db: db.execute("DELETE FROM feed_followers WHERE follower = ?", (follower,))
            )

    return RunWatch(close)


def followed(db: sqlite3.Connection) -> bool:
    """Whether anyone follows every append, read inside the writer's transaction."""
    return db.execute("SELECT 1 FROM feed_followers LIMIT 1").fetchone() is not None


async def _poll(read: Read, on_change: Callable[[str], None], interval: float, mark: int) -> None:
    while True:
        try:
            rows = read(
                "SELECT gseq, run_id FROM run_feed WHERE gseq > ? ORDER BY gseq LIMIT ?",
                (mark, _BATCH),
            )
        except WorldError as err:  # locked for longer than busy_timeout: try again
            log.warning("reading the change feed failed: %s", err)
            rows = []
        for gseq, run_id in rows:
            mark = gseq
            on_change(run_id)
        if len(rows) < _BATCH:
            await asyncio.sleep(interval)


_ENDS_INTERVAL = 0.003
"""Seconds between reads of the feed while a result is awaited and runs move: one query for
every waiter (a waiter polling its own run read once per waiter), so the ends of runs driven
by other processes are heard within a few milliseconds."""
_ENDS_IDLE = 0.05
"""The longest pause: each read that finds nothing another process appended doubles the pause
up to this (a wait on a run that takes hours reads 20 times a second, not 300)."""
_OWN_KEPT = 10_000
"""Feed numbers this process wrote and ``Ends`` has not read yet; past this the memory starts
again empty (a row then counts as another process's: one read at the quick pace too many)."""


class Ends:
    """Hears the runs that end, whichever process wrote the end, while anyone waits for one:
    one task reads the feed above a mark taken when the first waiter came (before that
    waiter's own read of its run, so no end falls between the two) and tells ``heard`` each
    waited-for run whose status is terminal. It stops when nobody waits. Its pace quickens
    only for rows another process wrote: this process's own are told to it (``written``)."""

    def __init__(
        self,
        read: Read,
        waited: Callable[[], Collection[str]],
        heard: Callable[[str], None],
        terminal: Collection[str],
    ) -> None:
        self._read, self._waited, self._heard = read, waited, heard
        self._terminal = frozenset(terminal)
        self._task: asyncio.Task[None] | None = None
        self._own: set[int] = set()

    def written(self, gseqs: Sequence[int]) -> None:
        """Feed rows this process wrote (``GroupWriter``): the ends among them woke their
        waiters as they were appended, so finding them is no reason to read again soon."""
        if len(self._own) + len(gseqs) > _OWN_KEPT:
            self._own.clear()
        self._own.update(gseqs)

    def wanted(self) -> None:
        """A waiter came: follow from now, unless already following."""
        if self._task is not None and not self._task.done():
            return
        try:
            mark = int(self._read("SELECT COALESCE(MAX(gseq), 0) FROM run_feed", ())[0][0])
        except WorldError as err:  # the waiter's own reads (its safety poll) still come
            log.warning("reading the change feed failed: %s", err)
            return
        self._task = asyncio.create_task(self._follow(mark), name="wayline-run-ends")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self, mark: int) -> None:
        pause = _ENDS_INTERVAL
        while self._waited():
            await asyncio.sleep(pause)
            try:
                rows = self._read(
                    "SELECT f.gseq, f.run_id, r.status FROM run_feed f "
                    "LEFT JOIN runs r ON r.run_id = f.run_id "
                    "WHERE f.gseq > ? ORDER BY f.gseq LIMIT ?",
                    (mark, _BATCH),
                )
            except WorldError as err:  # locked for longer than busy_timeout: try again
                log.warning("reading the change feed failed: %s", err)
                continue
            waited, foreign = self._waited(), False
            for gseq, run_id, status in rows:
                mark = gseq
                if gseq in self._own:
                    self._own.discard(gseq)
                else:
                    foreign = True
                if status in self._terminal and run_id in waited:
                    self._heard(run_id)
            # Only another process's rows keep the pace quick: an end written here woke its
            # waiters when it was appended (``LocalWorld.append``), without this read.
            pause = _ENDS_INTERVAL if foreign else min(_ENDS_IDLE, pause * 2)
