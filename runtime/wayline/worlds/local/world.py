"""``LocalWorld``: the World contract on one SQLite file (standard library, WAL mode).

The world composes one part a port, as the NATS world does, each in the module of the same
name: the file and its transactions (``database``), the event log (``eventlog``, appended to by
``group``), the queue (``queue``), the registry of served workflows (``registry``), step
streams (``streams``), concurrency slots (``slots``), rate limits (``rate_buckets``),
retention (``retention``), blobs (``blobs``) and hook payloads (``hook_buffer``).

Durability: WAL with ``synchronous=FULL`` by default, so a commit is on disk (fsync) before the
call returns and an OS crash or power loss keeps it. Appends of concurrent runs share one
commit (``group``), so the fsync is paid per batch, not per run. ``sqlite:///x.db?sync=normal``
(``synchronous="NORMAL"``) skips the fsync: still safe against any process crash (the tests
SIGKILL workers), but an OS crash may lose the last commits.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ..._core import ordering
from ..._core.events import RUN_TERMINAL_EVENTS, Event, NewEvent, RunStatus
from ..._core.search_attributes import Where
from ...errors import BlobMissingError, ConfigurationError, WorldUnavailableError
from ...settings import Settings
from ...world import (
    Finding,
    HookInfo,
    RunInfo,
    RunWatch,
    World,
    terminal_statuses,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, OutOfLine, orphan_grace, payload_field
from ...world.part_forwarding import ForwardsToParts, ForwardsToQueue
from ...world.ports.blobs import CHUNK_BYTES, BlobRef, PayloadField
from . import checkup
from .blobs import LocalBlobs, stream_blob
from .database import Database
from .eventlog import LocalEventLog
from .feed import Ends, follow
from .group import GroupWriter
from .holders import current_holder
from .hook_buffer import LocalHookBuffer
from .queue import LocalQueue
from .rate_buckets import LocalRateBuckets
from .registry import LocalRegistry
from .retention import LocalRetention
from .slots import LocalSlots
from .streams import LocalStreams

_SYNC_MODES = ("FULL", "NORMAL")
"""``PRAGMA synchronous`` values a world accepts (WAL mode: FULL fsyncs each commit)."""


class LocalWorld(ForwardsToParts, ForwardsToQueue, World):
    _queue: LocalQueue

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
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous.upper()
        self._database = Database(self.path, self.url, busy_timeout, self._synchronous)
        self.blobs = OutOfLine(LocalBlobs(self._write, self._read), inline_payload_bytes)
        self._hook_buffer = LocalHookBuffer(self._write, self._read)
        self._poll = poll_interval
        self._holder = current_holder()
        self._ends = Ends(
            self._read, self._waited_ends, self._wake_terminal, terminal_statuses(None)
        )
        self._writer = GroupWriter(self._conn, self._unavailable, self._ends.written)
        self._log = LocalEventLog(
            self._write, self._read, self._read_together, self.blobs, self._writer
        )
        self._queue = LocalQueue(
            self._write,
            self._write_unsynced,
            self._read,
            holder=self._holder,
            visibility=visibility_seconds,
            aging=aging_seconds,
            poll=poll_interval,
            now=self.now,
        )
        self._served = LocalRegistry(self._write, self._read)
        self._streams = LocalStreams(self._write, self._read)
        self._slots = LocalSlots(self._write)
        self._rates = LocalRateBuckets(self._write)
        self._retention = LocalRetention(
            self._write, self._read, self._read_together, self._writer, self._orphan_grace
        )

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
        """Open the file and create what is missing, idempotently (``database``), then take
        back the messages of dead local holders (``queue``)."""
        if self._db is not None:
            return
        await self._database.start()
        self._queue.start(str(self.path.resolve()))

    async def close(self) -> None:
        await self._ends.close()
        self._database.close()

    # The file's connection and transactions are the database's (``database``); these names
    # stay for the parts that take them as callables and for tests that look at the file.
    @property
    def _db(self) -> sqlite3.Connection | None:
        return self._database.connection

    def _conn(self) -> sqlite3.Connection:
        return self._database.conn()

    def _unavailable(self, err: BaseException) -> WorldUnavailableError:
        return self._database.unavailable(err)

    def _write(self, fn: Any, *args: Any) -> Any:
        return self._database.write(fn, *args)

    def _write_unsynced(self, fn: Any, *args: Any) -> Any:
        return self._database.write_unsynced(fn, *args)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._database.read(sql, params)

    def _read_together(self, *queries: tuple[str, Sequence[Any]]) -> list[list[Any]]:
        return self._database.read_together(*queries)

    def _wake(self) -> None:
        """Wake this process's receivers of the file at once (``queue``)."""
        self._queue.wake()

    # event log (``eventlog``; appends go through ``group``) -------------------------------
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
        return await self._log.list_events(run_id, after_seq)

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self._log.stored_events(run_id, after_seq)

    async def events_page(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        return await self._log.events_page(run_id, after_seq, limit)

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self._log.get_run(run_id)

    async def stored_run(self, run_id: str) -> RunInfo | None:
        return self._log.stored_run(run_id)

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        return await self._log.repair_run(run_id, drop_seq)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        return await self._log.list_runs(
            status=status, workflow=workflow, limit=limit, where=where, since=since
        )

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
        return await self._log.runs_page(
            after=after, limit=limit, status=status, workflow=workflow, where=where
        )

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        return await self._log.count_runs(workflow=workflow, where=where)

    async def runs_mark(self) -> int | None:
        return await self._log.runs_mark()

    async def get_hook(self, token: str) -> HookInfo | None:
        return await self._log.get_hook(token)

    def hook_buffer(self) -> LocalHookBuffer:
        return self._hook_buffer

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """Polls the ``run_feed`` table above a high-water mark (``feed``), so appends by
        every process are seen, within the world's poll interval."""
        return await follow(self._write, self._read, self._holder, on_change, max(self._poll, 0.05))

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
        return payload_field(self._log.stored_run(run_id), which)
