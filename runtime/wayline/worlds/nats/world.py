"""``NatsWorld``: the World contract on NATS JetStream (see eventlog.py and queue.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, cast

from ..._core import ordering
from ..._core.cancels import cancels, stop_if_cancelled
from ..._core.events import Event, EventType, NewEvent, RunStatus
from ..._core.ids import MessageId
from ..._core.search_attributes import Where
from ...errors import (
    BlobMissingError,
    ConfigurationError,
    WaylineError,
    WorldUnavailableError,
)
from ...settings import Settings
from ...world import (
    Delivery,
    Finding,
    HookInfo,
    QueueDepth,
    RunInfo,
    RunWatch,
    World,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, OutOfLine, orphan_grace, payload_field
from ...world.ports import LaneDrain
from ...world.ports.blobs import CHUNK_BYTES, BlobRef, PayloadField, prepended
from . import attribute_index
from .blobs import CHUNK as STORED_CHUNK
from .blobs import NatsBlobs
from .checkup import check_connected, connect_failure, monitor_base, read_varz, sync_line
from .cleanup import NatsCleanup
from .codec import wrap
from .connection import Link, close_quietly, connect, fail_in_flight, refuse_missing
from .eventlog import EventLog
from .hook_buffer import NatsHookBuffer
from .names import MAX_PARTITIONS, Names, partition_of, token_value
from .options import ConnectOptions, check_server, display_url, parse_url, redact
from .partitions import AllPartitions
from .provision import check_jetstream, check_partitions, check_version, provision
from .queue import Queue
from .rate_buckets import RateBuckets
from .registry import NatsRegistry
from .runs_listing import NatsRunsListing
from .runs_model import RunsModel
from .skew import Skew
from .slots import Slots
from .streams import Streams

log = logging.getLogger("wayline.worlds.nats")


_PART_WAIT = 0.05
"""Seconds a receive over several partitions waits on one before it asks the next, when none
had anything (``NatsWorld._receive_parts``): a publish heard on the topic ends the wait
early, so this bounds only how late a message no publish told of is taken."""

CLOSE_GRACE = 2.0
"""Seconds a close waits at most for the runs index's writer to write what is noted: enough for
a batch against a server that answers, short enough that a close on a connection that gets no
answer stays prompt."""


class NatsWorld(World):
    """Event log and queue on JetStream. Create with a server URL (or several) and ``start()``
    (or ``async with``); ``from_url`` takes the ``nats://…?prefix=…`` form."""

    terminal_hints = True  # every terminal append's republish carries Wayline-Terminal
    hears_every_end = True  # the republish reaches every world, waiter or not (heard_ended)
    get_run_reads_log = True  # a run's summary is the fold of its log, caught up on each read

    def __init__(
        self,
        servers: str | list[str] = "nats://127.0.0.1:4222",
        *,
        prefix: str = "wayline",
        replicas: int = 1,
        storage: str = "file",
        visibility_seconds: float | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        creds: str | None = None,
        nkeys_seed: str | None = None,
        nkeys_seed_str: str | None = None,
        tls: ssl.SSLContext | None = None,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_hostname: str | None = None,
        name: str | None = "wayline",
        connect_timeout: float = 2.0,
        connect_attempts: int = 3,
        reconnect_time_wait: float = 1.0,
        max_reconnect_attempts: int = -1,
        ping_interval: float = 20.0,
        request_timeout: float = 5.0,
        connect_options: Mapping[str, Any] | None = None,
        inline_payload_bytes: int | None = None,
        create: bool = True,
        orphan_grace_seconds: float = ORPHAN_GRACE_SECONDS,
        aging_seconds: float = ordering.AGING_SECONDS,
        gather_appends: bool | int = False,
        partitions: int = 1,
        consume: str | Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self._orphan_grace = orphan_grace(orphan_grace_seconds)
        server_list = [servers] if isinstance(servers, str) else list(servers)
        server_list = [s.strip() for entry in server_list for s in entry.split(",") if s.strip()]
        if not server_list:
            raise ConfigurationError("NatsWorld needs at least one server URL")
        for server in server_list:  # as ``from_url`` checks a URL's servers (``parse_url``)
            check_server(server)
        if storage not in ("file", "memory"):
            raise ConfigurationError(f"NATS storage must be 'file' or 'memory', not {storage!r}")
        if replicas < 1:
            raise ConfigurationError(f"NATS replicas must be >= 1, not {replicas}")
        if (
            not isinstance(partitions, int)
            or isinstance(partitions, bool)
            or not 1 <= partitions <= MAX_PARTITIONS
        ):
            raise ConfigurationError(
                f"NATS partitions must be a whole number from 1 to {MAX_PARTITIONS}, "
                f"not {partitions!r}",
                partitions=str(partitions),
            )
        self.partitions = partitions
        """Fixed when the world is made (``provision.check_partitions``): each partition an
        events stream and a queue stream of its own; 1, today's names."""
        self.consumed = _consumed(consume, partitions)
        """The partitions this world's receives take work from (every one by default): a
        worker can be given some of them (``?consume=0,2``); what it sends goes wherever
        its run lives, whatever it consumes."""
        if visibility_seconds is None:  # WAYLINE_VISIBILITY_SECONDS, as for every world
            visibility_seconds = Settings.from_env().visibility_seconds
        if visibility_seconds <= 0:
            raise ConfigurationError("visibility_seconds must be > 0")
        if inline_payload_bytes is None:  # WAYLINE_INLINE_PAYLOAD_BYTES
            inline_payload_bytes = Settings.from_env().inline_payload_bytes
        self._inline_bytes = inline_payload_bytes
        self._create = create
        """False: a world whose event stream is missing is refused at start, not created (a
        mistyped prefix in a command that only reads must not look like "no runs")."""
        self._closes = 0
        """How many times close() was called: a start() that one crossed gives up."""
        self.blobs: OutOfLine | None = None
        self.names = Names(prefix)
        self.prefix = prefix
        self.replicas = replicas
        self.storage = storage
        self._visibility = float(visibility_seconds)
        self._aging = aging_seconds
        self._options = ConnectOptions(
            servers=server_list,
            user=user,
            password=password,
            token=token,
            creds=creds,
            nkeys_seed=nkeys_seed,
            nkeys_seed_str=nkeys_seed_str,
            tls=tls,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_hostname=tls_hostname,
            name=name,
            connect_timeout=connect_timeout,
            connect_attempts=max(1, connect_attempts),
            reconnect_time_wait=reconnect_time_wait,
            max_reconnect_attempts=max_reconnect_attempts,
            ping_interval=ping_interval,
            request_timeout=request_timeout,
            extra=dict(connect_options or {}),
        )
        self.url = display_url(server_list, prefix, partitions)
        self._servers_shown = ",".join(redact(s) for s in server_list)
        self._nc: Any = None
        self._js: Any = None
        self._log: EventLog | None = None
        self._queue: Queue | None = None
        self._logs: list[EventLog] = []
        """Every partition's log (the first is ``_log``); empty until started."""
        self._queues: list[Queue] = []
        self._all: AllPartitions | None = None
        """Reads the logs of all partitions as one, in a world of several."""
        self._turn = 0
        self._takes: list[Queue] = []
        """The queues of the consumed partitions (``consumed``)."""
        """The partition a receive asks first, moved on by each receive (``receive``)."""
        self._streams: Streams | None = None
        self._slots: Slots | None = None
        self._rates: RateBuckets | None = None
        self._hook_buf: NatsHookBuffer | None = None
        self.skew = Skew()
        self._blob_store: Any = None
        link = Link(
            lambda: self._nc,
            lambda: self._js,
            lambda: self._log,
            self.url,
            self._servers_shown,
            self._options.request_timeout,
        )
        self._registry = NatsRegistry(link, self._jetstream, self.names, self.skew, self.now)
        self._listing = NatsRunsListing(
            link, self._every_log, self.names, self.now, functools.partial(World.count_runs, self)
        )
        self._cleanup = NatsCleanup(
            link,
            lambda: self._queue,
            self._every_log,
            self._st,
            lambda: self._blob_store,
            self.flush_runs_index,
            self._listing.forget_run,
            self.names,
            self._orphan_grace,
        )
        if partitions > 1:
            self._cleanup.parts = lambda: list(zip(self._logs, self._queues, strict=True))
        # a bool or a whole number only: int() would raise its own ValueError or TypeError for
        # a word or None, and quietly cut 2.5 to 2 (the URL's ?gather_appends= is parsed to an
        # int by options.parse_url, which names the option when it is not one)
        if not isinstance(gather_appends, int) or gather_appends < 0:
            raise ConfigurationError(
                f"gather_appends must be a whole number >= 0 or a bool, not {gather_appends!r}"
            )
        self._gather_appends = int(gather_appends)
        """Appends of concurrent runs go as one atomic batch (``gather.py``): 0 (the default)
        never, since it pays only on a server that fsyncs each write (``sync_interval:
        always``); 1 when a turn makes ``gather.MIN_BATCH`` or more; N >= 2 when it makes N."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> NatsWorld:
        """``nats://[user:pass@]host:port[,host2:port]?prefix=...&replicas=...``; keyword
        options override the URL's."""
        servers, parsed = parse_url(url)
        parsed.update(options)
        return cls(servers, **parsed)

    def names_of(self, run_id: str) -> Names:
        """The names of the partition ``run_id`` lives in: its events stream and subject, its
        queue stream (``names`` itself in a world of one partition)."""
        if self.partitions == 1:
            return self.names
        return self.names.partition(partition_of(run_id, self.partitions))

    @property
    def visibility_seconds(self) -> float:
        return self._visibility

    def now(self) -> float:
        """The server's clock, as this process's appends have shown it (``skew.py``)."""
        return self.skew.now()

    # workers (``registry``) ----------------------------------------------------------------
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        await self._registry.record_served(entries)

    async def list_served(self) -> list[dict[str, Any]]:
        return await self._registry.list_served()

    # step streams ---------------------------------------------------------------------------
    def _st(self) -> Streams:
        if self._log is None or self._nc is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        if self._streams is None:
            self._streams = Streams(
                self._nc,
                self._js,
                self.names,
                replicas=self.replicas,
                memory=self.storage == "memory",
                url=self._servers_shown,
                timeout=self._options.request_timeout,
            )
        return self._streams

    def hook_buffer(self) -> NatsHookBuffer:
        if self._hook_buf is None:
            self._hook_buf = NatsHookBuffer(
                self._jetstream(),
                self.names,
                replicas=self.replicas,
                memory=self.storage == "memory",
                url=self._servers_shown,
                now=self.skew.now,
            )
        return self._hook_buf

    def _slot_store(self) -> Slots:
        if self._slots is None:
            self._slots = Slots(
                self._jetstream(),
                self.names,
                self.get_run,
                replicas=self.replicas,
                memory=self.storage == "memory",
                url=self._servers_shown,
                now=self.skew.now,
            )
        return self._slots

    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        if self._rates is None:
            self._rates = RateBuckets(
                self._jetstream(),
                self.names,
                replicas=self.replicas,
                memory=self.storage == "memory",
                url=self._servers_shown,
                now=self.skew.now,
            )
        return await self._rates.take(key, per_second, burst, holder)

    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        return await self._slot_store().acquire(key, holder, limit, lease, token)

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        return await self._slot_store().renew(key, holder, lease, token)

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        await self._slot_store().release(key, holder, token)

    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        await self._st().write(run_id, stream, records)

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        return await self._st().read(run_id, stream, start, limit)

    # retention (``cleanup``) ---------------------------------------------------------------
    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        return await self._cleanup.delete_runs(older_than=older_than, statuses=statuses)

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        return await self._cleanup.archive_runs(older_than=older_than, limit=limit)

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        return await self._cleanup.archived_run(run_id)

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        return await self._cleanup.archived_page(run_id, after_seq, limit)

    async def archived_count(self) -> int:
        return await self._cleanup.archived_count()

    # lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._nc is not None:
            return
        closes, stops = self._closes, cancels()
        try:
            nc = await self._connect()
        except Exception:
            # A stop that the connect swallowed (the close of a failed attempt waits with
            # ``wait_for``) is raised as the stop, not as the connect's error: a caller that
            # starts the world again on a WorldUnavailableError took the stop for an outage.
            stop_if_cancelled(stops)
            raise
        try:
            self._refuse_if_closed(closes)  # close() came while connecting
            self._nc = nc
            js = nc.jetstream(timeout=self._options.request_timeout)
            shown = self._servers_shown
            check_version(nc, shown)
            await check_jetstream(nc, js, shown, self._options.request_timeout)
            if not self._create:
                await refuse_missing(js, self.names.events_stream, self.prefix, shown)
            await check_partitions(
                js,
                self.names,
                self.partitions,
                replicas=self.replicas,
                storage=self.storage,
                url=shown,
            )
            await provision(
                js,
                self.names,
                replicas=self.replicas,
                storage=self.storage,
                url=shown,
                partitions=self.partitions,
            )
            # Each JetStream request of the setup is a nats-py ``request``, whose
            # ``asyncio.wait_for`` (Python 3.11) drops a stop that lands as the answer comes:
            # the start went on, and a worker stopped at that moment served on. The task
            # still counts the stop, so it is raised here and below, and the client closed.
            stop_if_cancelled(stops)
            logs: list[EventLog] = []
            queues: list[Queue] = []
            for part in range(self.partitions):
                names = self.names.partition(part)
                event_log = EventLog(
                    nc,
                    js,
                    names,
                    url=shown,
                    timeout=self._options.request_timeout,
                    on_terminal=self._wake_terminal,
                    skew=self.skew,
                    gather=self._gather_appends,
                )
                if logs:  # one change feed for the world, whichever partition a run is in
                    event_log.listeners = logs[0].listeners
                await event_log.start()
                logs.append(event_log)
                queue = Queue(
                    nc,
                    js,
                    names,
                    url=shown,
                    timeout=self._options.request_timeout,
                    visibility=self._visibility,
                    replicas=self.replicas,
                    memory=self.storage == "memory",
                    now=self.skew.now,
                    aging_seconds=self._aging,
                )
                await queue.start()
                queues.append(queue)
            if len(logs) > 1:
                every = AllPartitions(logs)
                for one in logs:  # a hook token's holder may live in another partition
                    one.claims.locate = lambda run, every=every: every.of(run).claims
            self._refuse_if_closed(closes)  # close() came while provisioning: nc is closed
            stop_if_cancelled(stops)  # a stop that a request of the setup swallowed
        except BaseException as err:
            if self._nc is nc:
                self._nc = None
            await close_quietly(nc)
            if isinstance(err, Exception):
                stop_if_cancelled(stops)  # a stop that a request swallowed before it failed
            if isinstance(err, Exception) and not isinstance(err, WaylineError):
                # e.g. a bucket lookup timing out while a fresh cluster elects its streams'
                # leaders: the caller handles world errors, not the client library's
                raise wrap(self._servers_shown, "starting the world", err) from err
            raise
        self._nc, self._js, self._log, self._queue = nc, js, logs[0], queues[0]
        self._logs, self._queues = logs, queues
        self._takes = [queues[part] for part in self.consumed]
        self._all = AllPartitions(logs) if len(logs) > 1 else None
        self._blob_store = NatsBlobs(
            nc,
            js,
            self.names,
            replicas=self.replicas,
            memory=self.storage == "memory",
            url=shown,
            timeout=self._options.request_timeout,
        )
        self.blobs = OutOfLine(self._blob_store, self._inline_bytes)

    def _refuse_if_closed(self, closes: int) -> None:
        """A start() that ``close()`` crossed ends as unavailable: nothing of it stays open."""
        if closes != self._closes:
            raise WorldUnavailableError(
                f"world {self.url} was closed while it started", url=self._servers_shown
            )

    async def checkup(self, monitors: Sequence[str] = ()) -> list[Finding]:
        """``wayline doctor``: a connection of its own (the world need not be started, and
        nothing is created), then the server, its JetStream account and the sync setting of
        each monitoring endpoint (``checkup.py``)."""
        for monitor in monitors:
            monitor_base(monitor)  # a malformed URL is bad input, before any connection
        try:
            nc = await self._connect()
        except WaylineError as err:
            return [connect_failure(err.message)]
        try:
            return await check_connected(
                nc, self._options, self.names, self.prefix, self._servers_shown, monitors
            )
        finally:
            await close_quietly(nc)

    async def sync_warning(self, monitors: Sequence[str] = ()) -> str | None:
        """The first monitored server that acknowledges before fsync, as one line (a HTTP GET
        per endpoint: the client protocol does not tell)."""
        for monitor in monitors:
            line = sync_line(await read_varz(monitor), monitor)
            if line is not None:
                return line
        return None

    async def _connect(self) -> Any:
        return await connect(
            self._options,
            self._servers_shown,
            self._on_error,
            self._on_disconnect,
            self._on_reconnect,
        )

    async def _on_error(self, err: Exception) -> None:
        log.debug("nats client error on %s: %r", self._servers_shown, err)
        import nats.errors

        if isinstance(err, nats.errors.SlowConsumerError):  # messages dropped: hints too
            self._hints_may_be_lost()

    async def _on_disconnect(self) -> None:
        """Fail the requests in flight at once (their replies are lost with the connection)
        instead of letting each wait out its timeout; callers retry once reconnected."""
        import nats.errors

        nc = self._nc
        if nc is None or nc.is_closed:
            return
        log.warning("lost the connection to NATS at %s; reconnecting", self._servers_shown)
        for one in self._logs:  # appends made meanwhile go unheard
            one.hints_lost()
        for queue in self._queues:
            queue.lost_connection()  # held deliveries are no longer provably ours
        fail_in_flight(nc, nats.errors.ConnectionReconnectingError)

    async def _on_reconnect(self) -> None:
        log.warning("reconnected to NATS at %s", self._servers_shown)
        self._hints_may_be_lost()  # a run that ended during the outage was not heard

    async def close(self) -> None:
        self._closes += 1
        await self._listing.close(
            lambda: self._nc is not None and not self._nc.is_closed,
            min(self._options.request_timeout, CLOSE_GRACE),
        )
        nc, self._nc = self._nc, None
        for queue in self._queues:
            queue.lost_connection()  # a pull in progress ends now, as on a lost one
        for one in self._logs:
            await one.close()
        self._js = self._log = self._queue = self._all = None
        self._logs, self._queues, self._takes = [], [], []
        self._registry.close()
        self._streams = None
        self._slots = None
        self._rates = None
        self._hook_buf = None
        if nc is not None:
            import nats.errors

            await close_quietly(nc)
            # what still waits for a reply waits for nothing now: unavailable at once, not
            # after its request timeout
            fail_in_flight(nc, nats.errors.ConnectionClosedError)

    def _events(self) -> EventLog:
        if self._log is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._log

    def _log_of(self, run_id: str) -> EventLog:
        """The log of the partition ``run_id`` lives in (of the only one, in most worlds)."""
        every = self._all
        if every is None:
            return self._events()
        return every.of(run_id)

    def _every_log(self) -> EventLog:
        """What reads across runs: the log, or in a world of several partitions the reader of
        them all (which has the methods of a log that span runs, ``partitions.py``)."""
        log_ = self._events()
        return log_ if self._all is None else cast(EventLog, self._all)

    def _jetstream(self) -> Any:
        """The JetStream context of the started world, set with the log (``start``)."""
        self._events()  # raises as every call of a world that is not started does
        return self._js

    def _q(self) -> Queue:
        if self._queue is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._queue

    # event log ---------------------------------------------------------------------------
    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        log_ = self._log_of(run_id)
        msg_id = uuid.uuid4().hex  # chosen here: a run_created's names its incarnation
        indexed = attribute_index.values_set(events)
        if indexed:  # first: the index stays a superset of the log (see attribute_index)
            await self._listing.index().write(run_id, indexed)
        before = log_.cached_info(run_id)

        async def incarnation() -> str | None:
            return await log_.incarnation(run_id, events, msg_id)

        stored = await self._out_of_line().append(
            run_id,
            events,
            lambda stowed: log_.append(run_id, stowed, expected_seq, msg_id),
            incarnation,
        )
        if stored and stored[0].type is EventType.RUN_CREATED:
            info = log_.cached_info(run_id)
            if info is not None:  # this run_created is the run's: its route is fixed
                self.router.remember(info)
        if indexed:  # renewed after the append, so a stale-entry purge never takes it
            await self._listing.renew_index(run_id, indexed)
        after = log_.cached_info(run_id)
        if stored and after is not None and (before is None or before.status != after.status):
            await self._listing.note_status(
                after, before, new=stored[0].type is EventType.RUN_CREATED
            )
        return stored

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        events = await self._log_of(run_id).list_events(run_id, after_seq)
        return await self._out_of_line().resolve(run_id, events)

    async def events_page(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        """The page sliced from the run's catch-up (which reads only what this process has
        not read of the stream yet), and only the page's payloads read from their blobs."""
        page = await self._log_of(run_id).events_page(run_id, after_seq, limit)
        return await self._out_of_line().resolve(run_id, page)

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self._out_of_line().resolve_info(await self._log_of(run_id).get_run(run_id))

    # blobs (the blob port; a run's blobs are deleted with it by cleanup) ---------------------
    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        incarnation = await self._log_of(run_id).run_incarnation(run_id)
        return await self._out_of_line().put_blob(run_id, data, incarnation)

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        return await self._out_of_line().get_blob(run_id, ref)

    async def blob_chunks(
        self, run_id: str, ref: BlobRef, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[bytes]:
        """Streamed from the object store a few stored chunks at a time (``NatsBlobs.stream``),
        so a 64 MiB blob is never held whole. A blob that is not there raises before the first
        chunk; one whose chunks change under the read raises after what was sent (the caller's
        response is cut off rather than passed off as whole)."""
        self._out_of_line()  # WorldUnavailableError before a start
        store = self._blob_store
        # a reader that asks for less than a stored chunk at a time (a preview of the first
        # KiB) is likely to stop early: it is read one stored chunk a request, not a batch
        if chunk_bytes < STORED_CHUNK:
            stored = store.stream(run_id, ref.digest, incarnation=ref.incarnation, batch=1)
        else:
            stored = store.stream(run_id, ref.digest, incarnation=ref.incarnation)
        try:
            first = await anext(stored, None)
        except LookupError as err:  # its meta read, then its chunks gone: a cleanup between
            raise BlobMissingError(run_id, ref.seq, str(err), store=store.name) from None
        if first is None:
            raise BlobMissingError(run_id, ref.seq, f"no blob {ref.digest}", store=store.name)
        try:
            async for chunk in prepended(first, stored):
                for start in range(0, len(chunk), chunk_bytes):
                    yield chunk[start : start + chunk_bytes]
        except LookupError as err:
            raise BlobMissingError(run_id, ref.seq, str(err), store=store.name) from None

    async def payload_blob(self, run_id: str, which: PayloadField) -> BlobRef | None:
        return payload_field(await self._log_of(run_id).get_run(run_id), which)

    async def stored_run(self, run_id: str) -> RunInfo | None:
        return await self._log_of(run_id).get_run(run_id)

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self._log_of(run_id).list_events(run_id, after_seq)

    def _hints_may_be_lost(self) -> None:
        for one in self._logs:  # an id deleted and used again meanwhile went unheard
            one.forget_ended()
            one.hints_lost()
        super()._hints_may_be_lost()

    async def known_end(self, run_id: str) -> RunInfo | None:
        """From this process's projection: a run whose end it appended or read is not read
        again (a result awaited in the process that drove the run saves a round trip). The
        view is dropped when an append to the run is heard (its id was deleted and used
        again) and whenever a hint may have been lost (``_hints_may_be_lost``)."""
        info = self._log_of(run_id).cached_info(run_id)
        if info is None or not info.status.terminal:
            return None
        return await self._out_of_line().resolve_info(info)

    def log_mark(self, run_id: str) -> str | None:
        return None if self._log is None else self._log_of(run_id).mark(run_id)

    async def read_run_at(self, run_id: str, mark: str) -> tuple[RunInfo | None, list[Event]]:
        held = self._log_of(run_id).view_at(run_id, mark)
        if held is None:
            return await self.read_run(run_id)
        return await self._resolved(run_id, *held)

    async def read_run(self, run_id: str) -> tuple[RunInfo | None, list[Event]]:
        info, events = await self._log_of(run_id).read_run(run_id)
        return await self._resolved(run_id, info, events)

    async def read_run_after(
        self, run_id: str, after_seq: int
    ) -> tuple[RunInfo | None, list[Event]]:
        info, events = await self._log_of(run_id).read_run_after(run_id, after_seq)
        return await self._resolved(run_id, info, events)

    async def _resolved(
        self, run_id: str, info: RunInfo | None, events: list[Event]
    ) -> tuple[RunInfo | None, list[Event]]:
        blobs = self._out_of_line()
        if info is None or info.status.terminal:  # a late message: its status is enough
            return await blobs.resolve_info(info), []
        return await blobs.resolve_info(info), await blobs.resolve(run_id, events)

    # runs listing (``runs_listing``) ------------------------------------------------------
    async def flush_runs_index(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds until this process's runs index entries are written
        (``runs_writer``); False when some are still waiting."""
        return await self._listing.flush_runs_index(timeout)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        return await self._listing.list_runs(
            status=status, workflow=workflow, limit=limit, where=where, since=since
        )

    async def runs_mark(self) -> int | None:
        return await self._listing.runs_mark()

    async def follow_runs(self) -> None:
        await self._listing.follow_runs()

    def runs_loading(self) -> bool:
        return self._listing.runs_loading()

    async def runs_followed(self, timeout: float) -> RunsModel | None:
        return await self._listing.runs_followed(timeout)

    async def runs_page(
        self,
        *,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None = None,
        workflow: str | None = None,
        where: Sequence[Where] = (),
    ) -> list[RunInfo]:
        return await self._listing.runs_page(
            after=after, limit=limit, status=status, workflow=workflow, where=where
        )

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        return await self._listing.count_runs(workflow=workflow, where=where)

    def _out_of_line(self) -> OutOfLine:
        if self.blobs is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self.blobs

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        return await self._log_of(run_id).repair(run_id, drop_seq)

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """The events stream's headers-only republish (the one that carries timestamps) names
        the run of every append, by any writer; core NATS, so a reconnect may lose some."""
        listeners = self._events().listeners

        def heard(token: str) -> None:
            run_id = token_value(token)
            if run_id is not None:
                on_change(run_id)

        listeners.add(heard)

        async def close() -> None:
            listeners.discard(heard)

        return RunWatch(close)

    async def get_hook(self, token: str) -> HookInfo | None:
        return await self._events().get_hook(token)

    # queue ---------------------------------------------------------------------------------
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,  # every publish is stored the same way
    ) -> MessageId:
        topic = await self.router.topic(topic, payload)
        queue = self._q_for(payload)
        result: MessageId = await queue.enqueue(topic, payload, idempotency_key, delay_seconds)
        return result

    def _q_for(self, payload: Mapping[str, Any]) -> Queue:
        """The queue of the partition of the run a message is about (its ``runId``): a start,
        a wake, a step's work, a cancel or a hook's resume of a run in another partition than
        the sender's crosses to it by this message. One about no run goes to the first."""
        queue = self._q()
        if self._all is None:
            return queue
        run_id = payload.get("runId")
        if not isinstance(run_id, str):
            return queue
        return self._queues[partition_of(run_id, self.partitions)]

    def _q_of(self, delivery: Delivery) -> Queue:
        """The queue that made ``delivery``: the one whose stream it was delivered from."""
        queue = self._q()
        if self._all is None:
            return queue
        held = delivery.handle
        stream = str(held.msg.metadata.stream) if held is not None else ""
        for one in self._queues:
            if one.stream == stream:
                return one
        return queue

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        self._q()  # WorldUnavailableError before a start
        takes = self._takes
        if len(takes) == 1:
            result: list[Delivery] = await takes[0].receive(topic, max_messages, wait_seconds)
            return result
        return await self._receive_parts(topic, max(1, max_messages), wait_seconds)

    async def _receive_parts(self, topic: str, batch: int, wait_seconds: float) -> list[Delivery]:
        """A receive over every partition's queue: each is asked without waiting, from the
        one after where the last receive began (so no partition is always asked last); when
        none has anything, each waits a short turn in the same order until the deadline. A
        turn's wait ends early on a publish heard on the topic (``Queue.receive``), so a
        message is taken about as soon as with one partition, at the cost of a pull a
        partition when all are idle."""
        got: list[Delivery] = []
        try:
            return await self._receive_turns(topic, batch, wait_seconds, got)
        except BaseException:
            # Ended (cancelled) while asking a later partition: what the earlier ones handed
            # out goes back at once, as a receive's own pull does, not held to its ack wait.
            if got:
                await asyncio.shield(self._hand_back(got))
            raise

    async def _hand_back(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            try:
                await self.release(delivery)
            except Exception as err:  # its ack wait runs out: redelivered then, counted
                log.warning("could not hand back %s of a cancelled receive: %s", delivery, err)

    async def _receive_turns(
        self, topic: str, batch: int, wait_seconds: float, got: list[Delivery]
    ) -> list[Delivery]:
        queues = self._takes
        deadline = time.monotonic() + max(0.0, wait_seconds)
        first = True
        while True:
            self._turn = (self._turn + 1) % len(queues)
            order = queues[self._turn :] + queues[: self._turn]
            for queue in order:
                left = deadline - time.monotonic()
                wait = 0.0 if first or left <= 0 else min(left, _PART_WAIT)
                got += await queue.receive(topic, batch - len(got), wait)
                if len(got) >= batch or (got and not first):
                    return got
            if got or time.monotonic() >= deadline:
                return got
            first = False

    async def ack(self, delivery: Delivery) -> bool:
        return await self._q_of(delivery).ack(delivery)

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return await self._q_of(delivery).retry(delivery, delay_seconds)

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        return await self._q_of(delivery).release(delivery, delay_seconds, held=held)

    async def cancel_delayed(self, message_id: MessageId) -> bool:
        # Each partition's queue knows the schedules it published; the others answer False
        # without a request.
        for queue in self._every_q():
            if await queue.cancel_delayed(message_id):
                return True
        return False

    async def renew(self, delivery: Delivery) -> bool:
        return await self._q_of(delivery).renew(delivery)

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        return await self._q_of(delivery).dead_letter(delivery, reason)

    def _every_q(self) -> list[Queue]:
        self._q()  # WorldUnavailableError before a start
        return self._queues

    async def runs_with_messages(self) -> set[str] | None:
        out: set[str] = set()
        for queue in self._every_q():
            async for _, payload in queue.stored():
                run_id = payload.get("runId")
                if isinstance(run_id, str):
                    out.add(run_id)
        return out

    async def queue_depths(self) -> list[QueueDepth] | None:
        merged: dict[str, QueueDepth] = {}
        for queue in self._every_q():
            for depth in await queue.depths():
                was = merged.get(depth.topic)
                if was is not None:  # the topic's messages in several partitions
                    depth = QueueDepth(
                        depth.topic,
                        was.ready + depth.ready,
                        min(was.oldest_ready_at, depth.oldest_ready_at),
                    )
                merged[depth.topic] = depth
        return list(merged.values())

    async def drain_lanes(self, *, held_too: bool = False) -> LaneDrain:
        # every partition's queue has lanes of its own
        return LaneDrain.total([await queue.drain_lanes(held_too) for queue in self._every_q()])

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        queues = self._every_q()
        return {t: sum([await q.ready(t) for q in queues]) for t in dict.fromkeys(topics)}

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        queues = self._every_q()
        return {t: sum([await q.in_flight(t) for q in queues]) for t in dict.fromkeys(topics)}

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        queues = self._every_q()
        return {t: sum([await q.delayed(t, before) for q in queues]) for t in dict.fromkeys(topics)}

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._q().list_dead_letters(limit)
        return result


def _consumed(consume: str | Sequence[int] | None, partitions: int) -> list[int]:
    """The partitions named by ``consume`` (``"0,2"`` or ``[0, 2]``; None: all of them), in
    order, or a ``ConfigurationError`` naming the option for one that is not a partition."""
    if consume is None:
        return list(range(partitions))
    words = consume.split(",") if isinstance(consume, str) else list(consume)
    picked: list[int] = []
    for word in words:
        try:
            part = int(word.strip()) if isinstance(word, str) else word
        except ValueError:
            part = -1
        if type(part) is not int or not 0 <= part < partitions:
            raise ConfigurationError(
                f"NATS consume= names partition {word!r}, not one of 0 to {partitions - 1}",
                consume=str(consume),
            )
        if part not in picked:
            picked.append(part)
    if not picked:
        raise ConfigurationError("NATS consume= names no partition", consume=str(consume))
    return sorted(picked)
