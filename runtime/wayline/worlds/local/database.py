"""The SQLite file of a local world: its one connection, and the transactions every part of
the world writes and reads through (``write``, ``write_unsynced``, ``read``,
``read_together``). The world's parts take these as callables, as ``LocalBlobs`` does.

Calls run on the event loop's thread: a SQLite commit here costs tens of microseconds, less
than a hop to a thread pool would. Contention with another process is bounded by
``busy_timeout``; past it the call fails with :class:`WorldUnavailableError` naming the file.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import WorldUnavailableError
from . import attribute_index
from .failures import rollback, unavailable
from .schema import ORDERING_COLUMNS, ORDERING_INDEXES, SCHEMA


def _migrations(db: sqlite3.Connection) -> list[str]:
    """The statements that bring a database an older version wrote up to this one's tables
    (none for a current one)."""
    out: list[str] = []
    columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
    if "handbacks" not in columns:  # a database from before hand-backs were counted
        out.append("ALTER TABLE messages ADD COLUMN handbacks INTEGER NOT NULL DEFAULT 0")
    if "held_handbacks" not in columns:  # from before held hand-backs were told apart
        out.append("ALTER TABLE messages ADD COLUMN held_handbacks INTEGER NOT NULL DEFAULT 0")
    if "level" not in columns:  # a database from before ready work was ordered
        out += [s.strip() for s in ORDERING_COLUMNS.split(";") if s.strip()]
    columns = {r[1] for r in db.execute("PRAGMA table_info(slots)")}
    if "expires_at" not in columns:  # a database from before leased (step) slots
        out.append("ALTER TABLE slots ADD COLUMN expires_at REAL")
    if "token" not in columns:  # a database from before a take's token was kept
        out.append("ALTER TABLE slots ADD COLUMN token TEXT")
    return out


class Database:
    def __init__(self, path: Path, url: str, busy_timeout: float, synchronous: str) -> None:
        self.path = path
        self.url = url
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._db: sqlite3.Connection | None = None

    async def start(self) -> None:
        """Open the file and create what is missing, idempotently. Several processes may start
        on a new file at once: SQLite answers some of the setup's lock conflicts (the switch
        to WAL, a read upgraded to a write) at once, without waiting for ``busy_timeout``, so
        a conflict is tried again until that much time has passed."""
        if self._db is not None:
            return
        deadline = time.monotonic() + self._busy_timeout
        for attempt in itertools.count(1):
            try:
                self._db = self._open()
                break
            except WorldUnavailableError as err:
                if "is locked" not in err.message or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(min(0.2, 0.01 * attempt))

    def _open(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = None
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, isolation_level=None, timeout=self._busy_timeout, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            db.execute("PRAGMA foreign_keys=OFF")
            db.executescript(SCHEMA + attribute_index.SCHEMA)
            if _migrations(db):
                # Under a write lock, the columns read again: several processes opening an
                # older file at once each saw them missing, and all but the first to add one
                # failed on "duplicate column name". One transaction adds them all.
                db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _migrations(db):
                        db.execute(statement)
                    db.execute("COMMIT")
                except BaseException:
                    rollback(db)
                    raise
            db.executescript(ORDERING_INDEXES)
        except (sqlite3.Error, OSError) as err:
            if db is not None:
                db.close()
            raise self.unavailable(err) from err
        return db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._db

    def unavailable(self, err: BaseException) -> WorldUnavailableError:
        return unavailable(self.path, err, self._busy_timeout)

    def write(self, fn: Any, *args: Any) -> Any:
        db = self.conn()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise self.unavailable(err) from err
        return self._commit(db, fn, args)

    def write_unsynced(self, fn: Any, *args: Any) -> Any:
        """A write whose loss in an OS crash changes nothing that matters, committed without
        its own fsync: a claim or a settlement of a queue message (see ``queue._settle``), or a
        message the log brings back (``enqueue(recoverable=True)``, a start). The WAL is
        written in order, so the next synced commit makes it durable too; a crash before that
        loses only this tail, and the message is delivered again, as it would be after any
        crash of its holder. A ``sync=normal`` world is unsynced throughout anyway."""
        if self._synchronous != "FULL":
            return self.write(fn, *args)
        db = self.conn()
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            self._synced(db)
            raise self.unavailable(err) from err
        try:
            return self._commit(db, fn, args)
        finally:
            self._synced(db)

    def _synced(self, db: sqlite3.Connection) -> None:
        """Back to ``synchronous=FULL``, outside any transaction (``_commit`` ended it). Should
        that ever fail, the connection is closed rather than left writing without fsync:
        every later call of this world then fails as unavailable."""
        rollback(db)
        try:
            db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as err:
            db.close()
            self._db = None
            raise self.unavailable(err) from err

    def _commit(self, db: sqlite3.Connection, fn: Any, args: tuple[Any, ...]) -> Any:
        """Run ``fn`` in the open transaction and commit it; on any failure nothing of it is
        stored. A failure of the file (a full disk) under ``fn`` or at the commit is raised as
        the world's error, never as ``sqlite3``'s."""
        try:
            result = fn(db, *args)
            db.execute("COMMIT")
        except BaseException as err:
            rollback(db)
            if isinstance(err, sqlite3.Error):
                raise self.unavailable(err) from err
            raise
        return result

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self.conn().execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise self.unavailable(err) from err

    def read_together(self, *queries: tuple[str, Sequence[Any]]) -> list[list[Any]]:
        """Several reads from one snapshot (a deferred transaction's reads all see the
        database as its first read did): a commit by another connection in between is seen
        by all of them or by none."""
        db = self.conn()
        try:
            db.execute("BEGIN")
            try:
                return [db.execute(sql, params).fetchall() for sql, params in queries]
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        except sqlite3.Error as err:
            raise self.unavailable(err) from err

    @property
    def connection(self) -> sqlite3.Connection | None:
        """The open connection, None before ``start`` and after ``close``."""
        return self._db
