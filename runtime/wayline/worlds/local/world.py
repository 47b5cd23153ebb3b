"""``LocalWorld``: the World contract on one SQLite file (standard library, WAL mode).

Calls run on the event loop's thread: a SQLite commit here costs tens of microseconds, less
than a hop to a thread pool would. Contention with another process is bounded by
``busy_timeout``; past it the call fails with :class:`WorldUnavailableError` naming the file.

Durability: WAL with ``synchronous=FULL`` by default, so a commit is on disk (fsync) before the
call returns and an OS crash or power loss keeps it. Appends of concurrent runs share one
commit (``group``), so the fsync is paid per batch, not per run. ``sqlite:///x.db?sync=normal``
(``synchronous="NORMAL"``) skips the fsync: still safe against any process crash (the tests
SIGKILL workers), but an OS crash may lose the last commits.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ..._core import clock, ordering, rate_limits
from ..._core.events import (
    HOOK_ACTIVE,
    RUN_TERMINAL_EVENTS,
    Event,
    NewEvent,
    RunStatus,
)
from ..._core.ids import MessageId
from ..._core.search_attributes import Where
from ...errors import (
    BlobMissingError,
    ConfigurationError,
    CorruptEntryError,
    CorruptLogError,
    WorldUnavailableError,
)
from ...settings import Settings
from ...telemetry import carry
from ...world import (
    Delivery,
    Finding,
    HookInfo,
    QueueDepth,
    RunInfo,
    RunWatch,
    World,
    entries,
    terminal_statuses,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, OutOfLine, orphan_grace, payload_field
from ...world.ports.blobs import CHUNK_BYTES, BlobRef, PayloadField
from ...world.registry import merge_served
from ...world.routing import plain_topic
from . import attribute_index, checkup
from .blobs import LocalBlobs, archive_blobs, drop_orphans, stream_blob
from .changes import Changes, Seen
from .failures import rollback, unavailable
from .feed import Ends, follow
from .group import GroupWriter
from .holders import current_holder, holder_alive
from .hook_buffer import LocalHookBuffer
from .rows import (
    LIVE_HOOK,
    RUN_SELECT,
    check_end,
    events_from_rows,
    read_log,
    repair_tx,
    run_from_row,
)
from .schema import ORDERING_COLUMNS, ORDERING_INDEXES, SCHEMA

_LEVELS = range(ordering.MIN_PRIORITY, ordering.MAX_PRIORITY + 1)
_OLDEST_PER_LEVEL = "SELECT " + ", ".join(
    "(SELECT ready_at FROM messages WHERE topic = ?1 AND level = "
    f"{level} AND +available_at <= ?2 ORDER BY ready_at LIMIT 1)"
    for level in _LEVELS
)
"""Per priority level, when its longest-waiting ready message became ready (NULL: none
ready): a column a level, each a walk down messages_aging, in one statement."""

# In-process wake-ups: an enqueue wakes consumers of the same file in this process at once;
# other processes notice within the poll interval. Keyed by resolved path.
_WAKERS: dict[str, set[asyncio.Event]] = {}
# Commits by other processes: one receiver of the file per process looks for them.
_CHANGES: dict[str, Changes] = {}

_SYNC_MODES = ("FULL", "NORMAL")
"""``PRAGMA synchronous`` values a world accepts (WAL mode: FULL fsyncs each commit)."""

_RECLAIM_EVERY = 1.0  # seconds between scans for messages held by dead local processes
_SAME_TAKE = "(token IS NULL OR ? IS NULL OR token = ?)"
"""A renewal or give-back acts on the take that holds the slot now (its ``token``), not on an
older take of the same holder: a stale attempt whose redelivery took the step's slot again.
A row from before tokens (NULL), or a caller without one, matches any."""


class LocalWorld(World):
    @classmethod
    def from_url(cls, url: str, **options: Any) -> LocalWorld:
        """``sqlite:///relative.db`` or ``sqlite:////absolute/path.db`` (as SQLAlchemy writes
        them), with ``?sync=normal`` to commit without fsync (the default is ``full``)."""
        rest = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        path, _, query = rest.partition("?")
        if not path:
            raise ConfigurationError(f"no database path in {url!r} (try sqlite:///wayline.db)")
        given: str | None = None
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name != "sync":
                raise ConfigurationError(
                    f"unknown option {name!r} in world URL {url!r} (the one option is "
                    "sync=full|normal)"
                )
            if given is not None:
                raise ConfigurationError(f"sync= is given twice in world URL {url!r}")
            given = value
        if given is not None:
            options.setdefault("synchronous", given)
        return cls(path, **options)

    def __init__(
        self,
        path: str | Path = ".wayline/wayline.db",
        *,
        visibility_seconds: float | None = None,
        poll_interval: float = 0.05,
        busy_timeout: float = 5.0,
        synchronous: str = "FULL",
        inline_payload_bytes: int | None = None,
        aging_seconds: float = ordering.AGING_SECONDS,
        orphan_grace_seconds: float = ORPHAN_GRACE_SECONDS,
    ) -> None:
        super().__init__()
        self._orphan_grace = orphan_grace(orphan_grace_seconds)
        if synchronous.upper() not in _SYNC_MODES:
            raise ConfigurationError(
                f"sync={synchronous!r} is not a SQLite world's sync mode: use full (fsync each "
                "commit, the default) or normal (no fsync: an OS crash may lose the last commits)"
            )
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        if visibility_seconds is None or inline_payload_bytes is None:
            env = Settings.from_env()  # WAYLINE_VISIBILITY_SECONDS, as for every world
            if visibility_seconds is None:
                visibility_seconds = env.visibility_seconds
            if inline_payload_bytes is None:
                inline_payload_bytes = env.inline_payload_bytes
        self._visibility = visibility_seconds
        self._aging = aging_seconds
        self.blobs = OutOfLine(LocalBlobs(self._write, self._read), inline_payload_bytes)
        self._hook_buffer = LocalHookBuffer(self._write, self._read)
        self._poll = poll_interval
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous.upper()
        self._db: sqlite3.Connection | None = None
        self._holder = current_holder()
        self._last_reclaim = 0.0
        self._key = ""
        self._ends = Ends(
            self._read, self._waited_ends, self._wake_terminal, terminal_statuses(None)
        )
        self._writer = GroupWriter(self._conn, self._unavailable, self._ends.written)

    terminal_hints = True
    """An end appended in this process wakes its waiters at once (``append``); one written by
    another process is heard through the change feed (``feed.Ends``) within milliseconds."""

    def ends_wanted(self) -> None:
        if self._db is not None:
            self._ends.wanted()

    @property
    def visibility_seconds(self) -> float:
        return self._visibility

    async def checkup(self, monitors: Sequence[str] = ()) -> list[Finding]:
        """The file (read-only) and the sync mode of this world's URL (``checkup.py``); a
        SQLite world has no monitoring endpoint, so ``monitors`` is ignored."""
        return await asyncio.to_thread(checkup.checkup, self.path, self._synchronous)

    async def sync_warning(self, monitors: Sequence[str] = ()) -> str | None:
        return checkup.sync_warning(self.path, self._synchronous)

    # lifecycle --------------------------------------------------------------------------
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
        self._key = str(self.path.resolve())
        self._reclaim_dead_holders()

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
            columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
            if "handbacks" not in columns:  # a database from before hand-backs were counted
                db.execute("ALTER TABLE messages ADD COLUMN handbacks INTEGER NOT NULL DEFAULT 0")
            if "level" not in columns:  # a database from before ready work was ordered
                db.executescript(ORDERING_COLUMNS)
            db.executescript(ORDERING_INDEXES)
            columns = {r[1] for r in db.execute("PRAGMA table_info(slots)")}
            if "expires_at" not in columns:  # a database from before leased (step) slots
                db.execute("ALTER TABLE slots ADD COLUMN expires_at REAL")
            if "token" not in columns:  # a database from before a take's token was kept
                db.execute("ALTER TABLE slots ADD COLUMN token TEXT")
        except (sqlite3.Error, OSError) as err:
            if db is not None:
                db.close()
            raise self._unavailable(err) from err
        return db

    async def close(self) -> None:
        await self._ends.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._db

    def _unavailable(self, err: BaseException) -> WorldUnavailableError:
        return unavailable(self.path, err, self._busy_timeout)

    def _write(self, fn: Any, *args: Any) -> Any:
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise self._unavailable(err) from err
        return self._commit(db, fn, args)

    def _write_unsynced(self, fn: Any, *args: Any) -> Any:
        """A write whose loss in an OS crash changes nothing that matters, committed without
        its own fsync: a claim or a settlement of a queue message (see ``_settle``), or a
        message the log brings back (``enqueue(recoverable=True)``, a start). The WAL is
        written in order, so the next synced commit makes it durable too; a crash before that
        loses only this tail, and the message is delivered again, as it would be after any
        crash of its holder. A ``sync=normal`` world is unsynced throughout anyway."""
        if self._synchronous != "FULL":
            return self._write(fn, *args)
        db = self._conn()
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            self._synced(db)
            raise self._unavailable(err) from err
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
            raise self._unavailable(err) from err

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
                raise self._unavailable(err) from err
            raise
        return result

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise self._unavailable(err) from err

    def _read_together(self, *queries: tuple[str, Sequence[Any]]) -> list[list[Any]]:
        """Several reads from one snapshot (a deferred transaction's reads all see the
        database as its first read did): a commit by another connection in between is seen
        by all of them or by none."""
        db = self._conn()
        try:
            db.execute("BEGIN")
            try:
                return [db.execute(sql, params).fetchall() for sql, params in queries]
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        except sqlite3.Error as err:
            raise self._unavailable(err) from err

    # event log ---------------------------------------------------------------------------
    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        """Validated and written with the appends of every other run of this process that
        wait at the same moment: one transaction, one commit (``group``)."""
        if not events:
            return []
        result = await self.blobs.append(
            run_id, events, lambda stowed: self._writer.append(run_id, stowed, expected_seq)
        )
        if self._end_listeners and events[-1].type in RUN_TERMINAL_EVENTS:
            self._wake_terminal(run_id)
        return result

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

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self.blobs.resolve_info(self._stored_run(run_id))

    async def stored_run(self, run_id: str) -> RunInfo | None:
        return self._stored_run(run_id)

    def _stored_run(self, run_id: str) -> RunInfo | None:
        """The run's view as stored: a large input or output is still its reference."""
        rows = self._read(f"SELECT {RUN_SELECT} FROM runs WHERE run_id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    # blobs (the blob port; a run's blobs are deleted and archived with it) ----------------
    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        return await self.blobs.put_blob(run_id, data)

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        return await self.blobs.get_blob(run_id, ref)

    async def blob_chunks(
        self, run_id: str, ref: BlobRef, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[bytes]:
        """Read incrementally on a connection of the stream's own (``blobs.stream_blob``). A
        blob that is not there raises before the first chunk; one that changes under the read
        raises after what was sent (the caller's response is cut off, not passed off as
        whole)."""
        chunks = stream_blob(self.path, run_id, ref.digest, chunk_bytes, self._busy_timeout)
        name = self.blobs.store.name
        try:
            first = next(chunks, None)
            if first is None:
                raise BlobMissingError(run_id, ref.seq, f"no blob {ref.digest}", store=name)
            yield first
            for chunk in chunks:
                yield chunk
        except LookupError as err:
            raise BlobMissingError(run_id, ref.seq, str(err), store=name) from None
        except sqlite3.Error as err:
            raise self._unavailable(err) from err
        finally:
            chunks.close()

    async def payload_blob(self, run_id: str, which: PayloadField) -> BlobRef | None:
        return payload_field(self._stored_run(run_id), which)

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
        if status is RunStatus.CORRUPT:  # read from each run's log, not its row
            return await super().runs_page(
                after=after, limit=limit, status=status, workflow=workflow, where=where
            )
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

    def hook_buffer(self) -> LocalHookBuffer:
        return self._hook_buffer

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """Polls the ``run_feed`` table above a high-water mark (``feed``), so appends by
        every process are seen, within the world's poll interval."""
        return await follow(self._write, self._read, self._holder, on_change, max(self._poll, 0.05))

    # queue ---------------------------------------------------------------------------------
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        topic = await self.router.topic(topic, payload)
        stored = ordering.stamp(carry(payload))
        body = json.dumps(stored).encode()
        now = clock.now()
        write = self._write_unsynced if recoverable else self._write
        message_id: MessageId = write(
            self._enqueue_tx,
            topic,
            body,
            idempotency_key,
            now + max(0.0, delay_seconds),
            now,
            ordering.of_payload(stored),
        )
        self._wake()
        return message_id

    def _enqueue_tx(
        self,
        db: sqlite3.Connection,
        topic: str,
        body: bytes,
        key: str | None,
        available_at: float,
        now: float,
        order: ordering.Ordering,
    ) -> MessageId:
        # The message's fair tag (ordering.FairClock.tag, in two tables) is the later of the
        # topic's clock and its key's last finish. It is worked out inside the INSERT, so an
        # enqueue costs one statement less; the statement's own RETURNING hands it back.
        row = db.execute(
            "INSERT INTO messages (topic, payload, idem_key, available_at, created_at, level, "
            "ready_at, fair_tag) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?4, MAX("
            "COALESCE((SELECT vtime FROM fair_clock WHERE topic = ?1), 0), "
            "COALESCE((SELECT finish FROM fair_flows WHERE topic = ?1 AND key = ?7), 0))) "
            "ON CONFLICT (idem_key) DO NOTHING RETURNING id, fair_tag",
            (topic, body, key, available_at, now, order.priority, order.fairness_key),
        ).fetchone()
        if row is None:  # the key is held by a stored or in-flight message: dedupe to it
            row = db.execute("SELECT id FROM messages WHERE idem_key = ?", (key,)).fetchone()
        else:
            db.execute(
                "INSERT INTO fair_flows (topic, key, finish) VALUES (?,?,?) "
                "ON CONFLICT (topic, key) DO UPDATE SET finish = excluded.finish",
                (topic, order.fairness_key, float(row[1]) + 1.0 / order.fairness_weight),
            )
        return MessageId(str(row[0]))

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + wait_seconds
        waker = asyncio.Event()
        _WAKERS.setdefault(self._key, set()).add(waker)
        changes = _CHANGES.setdefault(self._key, Changes())
        try:
            while True:
                if time.monotonic() - self._last_reclaim > _RECLAIM_EVERY:
                    self._reclaim_dead_holders()
                # Both before the reads, so that a commit between them and the wait below is a
                # change the wait sees (``changes``), and an enqueue of this process then is a
                # wake it keeps.
                waker.clear()
                seen = Seen(self._data_version(), clock.offset())
                # A read first: idle consumers (every worker polls two topics) must not take
                # the database's write lock just to find nothing due.
                due = self._read(
                    "SELECT 1 FROM messages WHERE topic = ? AND available_at <= ? LIMIT 1",
                    (topic, clock.now()),
                )
                got: list[Delivery] = (
                    self._write_unsynced(self._claim_tx, topic, max_messages) if due else []
                )
                if got:
                    return got
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                rows = self._read(
                    "SELECT MIN(available_at) FROM messages WHERE topic = ?", (topic,)
                )
                nap = remaining
                if rows and rows[0][0] is not None:
                    nap = min(nap, max(0.0, rows[0][0] - clock.now()) + 0.001)
                await changes.wait(
                    waker,
                    lambda: _WAKERS.get(self._key, ()),
                    seen,
                    self._data_version,
                    self._poll,
                    nap,
                )
        finally:
            _WAKERS[self._key].discard(waker)

    def _data_version(self) -> int:
        """Changes when another connection commits to the file (``changes``)."""
        return int(self._read("PRAGMA data_version")[0][0])

    def _claim_tx(self, db: sqlite3.Connection, topic: str, limit: int) -> list[Delivery]:
        now = clock.now()
        # Rule 1 of ordering: each level's longest-waiting ready message, from messages_aging
        # (one short index walk per level: held messages are the only rows skipped), all
        # levels in one statement rather than one statement a level.
        row = db.execute(_OLDEST_PER_LEVEL, (topic, now)).fetchone()
        oldest = {level: at for level, at in zip(_LEVELS, row, strict=True) if at is not None}
        picked: list[Any] = []
        for level in ordering.level_order(oldest, now, self._aging):
            # Rule 2 within the level, down messages_order; the unary + keeps the planner off
            # messages_due, whose range would need every due message sorted.
            picked += db.execute(
                "SELECT id, available_at, fair_tag FROM messages WHERE topic = ? AND level = ? "
                "AND +available_at <= ? ORDER BY fair_tag, id LIMIT ?",
                (topic, level, now, limit - len(picked)),
            ).fetchall()
            if len(picked) >= limit:
                break
        if not picked:
            return []
        due = {r[0]: r[1] for r in picked}
        served = max(r[2] for r in picked)
        db.execute(
            "INSERT INTO fair_clock (topic, vtime) VALUES (?,?) "
            "ON CONFLICT (topic) DO UPDATE SET vtime = MAX(vtime, excluded.vtime)",
            (topic, served),
        )
        # a key whose finish the clock passed would start from the clock anyway
        db.execute(
            "DELETE FROM fair_flows WHERE topic = ? AND finish <= "
            "(SELECT vtime FROM fair_clock WHERE topic = ?)",
            (topic, topic),
        )
        marks = ",".join("?" * len(due))
        rows = db.execute(
            "UPDATE messages SET attempts = attempts + 1, holder = ?, available_at = ? "
            f"WHERE id IN ({marks}) RETURNING id, attempts, payload, handbacks",
            (self._holder, now + self._visibility, *due),
        ).fetchall()
        place = {r[0]: i for i, r in enumerate(picked)}
        rows.sort(key=lambda r: place[r[0]])  # a batch is handed out in the order picked
        return [
            Delivery(
                plain_topic(topic),
                MessageId(str(r[0])),
                r[1] - r[3],  # graceful hand-backs do not count against the budget
                _decode(r[2]),
                bytes(r[2]),
                (r[0], r[1]),  # the claim's attempt count fences every settlement
                due[r[0]],
            )
            for r in rows
        ]

    # A delivery is settled only by its holder: every settlement is fenced on the attempt
    # count the claim set, so A's late ack after B received the redelivery changes nothing.
    async def ack(self, delivery: Delivery) -> bool:
        return bool(self._settle("DELETE FROM messages WHERE id = ? AND attempts = ?", delivery))

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        at = clock.now() + max(0.0, delay_seconds)
        done = self._settle(
            "UPDATE messages SET available_at = ?1, ready_at = ?1, holder = NULL "
            "WHERE id = ?2 AND attempts = ?3",
            delivery,
            at,
        )
        self._wake()
        return done

    async def release(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        done = self._settle(
            "UPDATE messages SET available_at = ?1, ready_at = ?1, holder = NULL, "
            "handbacks = handbacks + 1 WHERE id = ?2 AND attempts = ?3",
            delivery,
            clock.now() + max(0.0, delay_seconds),
        )
        self._wake()
        return done

    async def renew(self, delivery: Delivery) -> bool:
        at = clock.now() + self._visibility
        return self._settle(
            "UPDATE messages SET available_at = ? WHERE id = ? AND attempts = ?", delivery, at
        )

    def _settle(self, sql: str, delivery: Delivery, *before: Any) -> bool:
        params = (*before, *delivery.handle)
        changed: int = self._write_unsynced(lambda db: db.execute(sql, params).rowcount)
        return changed > 0

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        def tx(db: sqlite3.Connection) -> bool:
            gone = db.execute(
                "DELETE FROM messages WHERE id = ? AND attempts = ?",
                delivery.handle,
            ).rowcount
            if not gone:
                return False
            db.execute(
                "INSERT INTO dead_letters (message_id, topic, payload, attempts, reason, "
                "created_at) VALUES (?,?,?,?,?,?)",
                (
                    delivery.message_id,
                    delivery.topic,
                    delivery.raw,
                    delivery.attempt,
                    reason,
                    clock.now(),
                ),
            )
            return True

        done: bool = self._write(tx)
        return done

    async def runs_with_messages(self) -> set[str] | None:
        out: set[str] = set()
        for (raw,) in self._read("SELECT payload FROM messages", ()):
            try:
                payload = entries.loads(bytes(raw))
            except entries.Unreadable:  # dead-lettered when it is delivered
                continue
            if isinstance(payload, dict) and isinstance(payload.get("runId"), str):
                out.add(payload["runId"])
        return out

    async def queue_depths(self) -> list[QueueDepth] | None:
        # a held message's available_at is its visibility deadline: not ready until then
        rows = self._read(
            "SELECT topic, COUNT(*), MIN(available_at) FROM messages WHERE available_at <= ? "
            "GROUP BY topic ORDER BY topic",
            (self.now(),),
        )
        return [QueueDepth(str(r[0]), int(r[1]), float(r[2])) for r in rows]

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        # a held message's available_at is its holder's visibility deadline: not counted
        # until that lapses and it is due again
        return self._count_messages(topics, "available_at <= ?")

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        # A held message has a holder and its available_at is the holder's visibility
        # deadline; once that lapses the message is due again, so it counts as ready.
        return self._count_messages(topics, "holder IS NOT NULL AND available_at > ?")

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        # A message no one holds whose available_at is still ahead waits out a delay; a held
        # one's available_at is its holder's visibility deadline, so the holder rules it out.
        return self._count_messages(
            topics, "holder IS NULL AND available_at > ? AND available_at <= ?", before
        )

    def _count_messages(self, topics: Sequence[str], due: str, *more: float) -> dict[str, int]:
        """The messages of each of ``topics`` for which ``due`` (a condition on the world's
        time now, its first parameter, then ``more``) holds, every topic asked for in the
        answer."""
        out = dict.fromkeys(topics, 0)
        wanted = list(out)
        for start in range(0, len(wanted), 500):  # under SQLite's bound on parameters
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for topic, count in self._read(
                f"SELECT topic, COUNT(*) FROM messages WHERE topic IN ({marks}) AND {due} "
                "GROUP BY topic",
                (*chunk, clock.now(), *more),
            ):
                out[topic] = int(count)
        return out

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT message_id, topic, payload, attempts, reason, created_at FROM dead_letters "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [
            {
                "messageId": r[0],
                "topic": r[1],
                "payload": bytes(r[2]).decode(errors="replace"),
                "attempts": r[3],
                "reason": r[4],
                "createdAt": r[5],
            }
            for r in rows
        ]

    # workers -------------------------------------------------------------------------------
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

    # step streams ---------------------------------------------------------------------------
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

    # concurrency slots ----------------------------------------------------------------------
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

    # rate limits ---------------------------------------------------------------------------
    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        def tx(db: sqlite3.Connection) -> float:
            row = db.execute(
                "SELECT tokens, at, reserved FROM rate_buckets WHERE key = ?", (key,)
            ).fetchone()
            before = None
            if row is not None:
                before = rate_limits.Bucket(float(row[0]), float(row[1]), json.loads(row[2]))
            bucket, wait = rate_limits.take(before, clock.now(), per_second, burst, holder)
            if bucket is not None:
                db.execute(
                    "INSERT OR REPLACE INTO rate_buckets (key, tokens, at, reserved) "
                    "VALUES (?,?,?,?)",
                    (key, bucket.tokens, bucket.at, json.dumps(dict(bucket.reserved))),
                )
            return wait

        wait: float = self._write(tx)
        return wait

    # retention -----------------------------------------------------------------------------
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

    # helpers -------------------------------------------------------------------------------
    def _wake(self) -> None:
        for waker in _WAKERS.get(self._key, ()):
            waker.set()

    def _reclaim_dead_holders(self) -> None:
        """Messages held by a process of this host that is gone come back now, not after the
        visibility timeout (the attempt was already counted when it was claimed)."""
        self._last_reclaim = time.monotonic()
        holders = [
            r[0]
            for r in self._read("SELECT DISTINCT holder FROM messages WHERE holder IS NOT NULL")
        ]
        dead = [h for h in holders if h != self._holder and not holder_alive(h)]
        for holder in dead:
            self._write(
                lambda db, h=holder: db.execute(
                    "UPDATE messages SET available_at = ?, holder = NULL WHERE holder = ?",
                    (clock.now(), h),
                )
            )
        if dead:
            self._wake()
        # A dead process's watch of every append would make each writer renumber the feed on
        # every append for nobody.
        followers = self._read("SELECT DISTINCT holder FROM feed_followers")
        for (holder,) in followers:
            if holder != self._holder and not holder_alive(holder):
                self._write(
                    lambda db, h=holder: db.execute(
                        "DELETE FROM feed_followers WHERE holder = ?", (h,)
                    )
                )


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


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


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
