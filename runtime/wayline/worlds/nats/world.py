"""``NatsWorld``: the World contract on NATS JetStream (see eventlog.py and queue.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..._core import clock, ordering, search_attributes
from ..._core.events import Event, EventType, NewEvent, RunStatus
from ..._core.ids import MessageId
from ..._core.search_attributes import Where
from ...errors import (
    BlobMissingError,
    ConfigurationError,
    WaylineError,
    WorldNotCreatedError,
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
    entries,
)
from ...world.blobs import ORPHAN_GRACE_SECONDS, OutOfLine, orphan_grace, payload_field
from ...world.ports.blobs import CHUNK_BYTES, BlobRef, PayloadField, prepended
from ...world.registry import merge_served, readable
from . import attribute_index, runs_pages
from .attribute_index import AttributeIndex
from .blobs import CHUNK as STORED_CHUNK
from .blobs import NatsBlobs
from .buckets import kv_bucket
from .checkup import check_connected, connect_failure, monitor_base, read_varz, sync_line
from .codec import parse_header_lines, parse_stamp, wrap
from .direct import connected, last_by_subject, lost_replies
from .eventlog import EventLog
from .failures import connect_bound, hopeless
from .hook_buffer import NatsHookBuffer
from .names import Names, kv_key, token_value
from .options import ConnectOptions, display_url, parse_url, redact
from .provision import check_jetstream, check_version, provision
from .queue import Queue
from .rate_buckets import RateBuckets
from .retention import Retention
from .runs_index import RunsIndex
from .runs_model import LOAD_WAIT, RunsModel
from .runs_writer import RunsWriter
from .skew import Skew
from .slots import Slots
from .streams import Streams
from .tls_only import refuse_plaintext

log = logging.getLogger("wayline.worlds.nats")


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
    ) -> None:
        super().__init__()
        self._orphan_grace = orphan_grace(orphan_grace_seconds)
        server_list = [servers] if isinstance(servers, str) else list(servers)
        server_list = [s.strip() for entry in server_list for s in entry.split(",") if s.strip()]
        if not server_list:
            raise ConfigurationError("NatsWorld needs at least one server URL")
        if storage not in ("file", "memory"):
            raise ConfigurationError(f"NATS storage must be 'file' or 'memory', not {storage!r}")
        if replicas < 1:
            raise ConfigurationError(f"NATS replicas must be >= 1, not {replicas}")
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
        self.url = display_url(server_list, prefix)
        self._servers_shown = ",".join(redact(s) for s in server_list)
        self._nc: Any = None
        self._js: Any = None
        self._attributes: AttributeIndex | None = None
        self._runs_index: RunsIndex | None = None
        self._runs_writer: RunsWriter | None = None
        self._runs_model: RunsModel | None = None
        self._log: EventLog | None = None
        self._queue: Queue | None = None
        self._served_kv: Any = None
        self._streams: Streams | None = None
        self._slots: Slots | None = None
        self._rates: RateBuckets | None = None
        self._hook_buf: NatsHookBuffer | None = None
        self.skew = Skew()
        self._blob_store: Any = None
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

    @property
    def visibility_seconds(self) -> float:
        return self._visibility

    def now(self) -> float:
        """The server's clock, as this process's appends have shown it (``skew.py``)."""
        return self.skew.now()

    # workers -------------------------------------------------------------------------------
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        kv = await self._served()
        for i, e in enumerate(entries):
            try:
                await self._merge_served(kv, kv_key(str(e["key"])), e, sample=i == 0)
            except Exception as err:
                raise wrap(self._servers_shown, "recording a worker heartbeat", err) from err

    async def _merge_served(
        self, kv: Any, key: str, entry: Mapping[str, Any], *, sample: bool = False
    ) -> None:
        """Merge ``entry`` into the stored one, compare-and-set on the key's revision (two
        workers of one definition heartbeat into the same key; neither loses the other).
        With ``sample``, the write's server stamp is also a sample of the server's clock
        (``skew.py``): a worker starts with one before it takes a delivery, and one every
        heartbeat keeps it current when the worker appends nothing."""
        import nats.js.errors

        while True:
            try:
                current = await kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                current = None
            stored: Any = None
            if current is not None and current.value:
                try:
                    stored = entries.loads(current.value)
                except entries.Unreadable:
                    stored = None
            merged = merge_served(stored if isinstance(stored, dict) else None, entry, self.now())
            if merged is None:
                return
            data = json.dumps(merged).encode()
            try:
                sent = clock.now()
                if current is None:
                    revision = await kv.create(key, data)
                else:
                    revision = await kv.update(key, data, last=current.revision)
                acked = clock.now()
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another worker wrote it meanwhile: merge into its entry
            if sample:
                await self._sample_clock(sent, acked, revision)
            return

    async def _sample_clock(self, sent: float, acked: float, revision: int) -> None:
        bucket = self.names.served_bucket
        try:
            raw = await self._jetstream().get_msg(f"KV_{bucket}", revision, direct=True)
            stamp = parse_stamp((raw.headers or {}).get("Nats-Time-Stamp", ""))
        except Exception as err:  # a sample is only a hint: the next one will do
            log.debug("no clock sample from the worker registry: %s", err)
            return
        self.skew.sample(sent, acked, stamp)

    async def list_served(self) -> list[dict[str, Any]]:
        """Every registry entry (``direct.last_by_subject``: the KV client's key listing missed
        a key written while it listed, and a live worker's heartbeat made it look gone). Bytes
        that are not an entry (anyone can write into the bucket) are passed over."""
        await self._served()  # the bucket exists (or the usual error)
        nc, bucket = self._nc, self.names.served_bucket
        if nc is None:  # closed meanwhile
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        try:
            await connected(nc, timeout=self._options.request_timeout, url=self._servers_shown)
            last = await last_by_subject(
                nc,
                f"KV_{bucket}",
                f"$KV.{bucket}.>",
                timeout=self._options.request_timeout,
                url=self._servers_shown,
            )
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._servers_shown, "listing worker heartbeats", err) from err
        out: list[dict[str, Any]] = []
        for m in last:
            if m.headers.get("KV-Operation") in ("DEL", "PURGE") or not m.data:
                continue
            try:
                entry = readable(entries.loads(m.data))
            except entries.Unreadable:
                continue
            if entry is not None:
                out.append(entry)
        return out

    async def _served(self) -> Any:
        if self._served_kv is None:
            if self._js is None:
                raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
            self._served_kv = await kv_bucket(
                self._js, self.names.served_bucket, url=self._servers_shown
            )
        return self._served_kv

    # retention -----------------------------------------------------------------------------
    def _retention(self) -> Retention:
        if self._log is None or self._queue is None or self._nc is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return Retention(
            self._nc,
            self._js,
            self.names,
            self._log,
            self._queue,
            url=self._servers_shown,
            timeout=self._options.request_timeout,
        )

    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        retention = self._retention()
        streams, blobs = self._st(), self._blob_store
        await self.flush_runs_index()  # an entry written after its run's purge names no run
        stored = await blobs.names()

        async def drop(info: RunInfo, incarnation: str | None, ended: float) -> None:
            run_id = info.run_id
            await streams.purge_run(run_id)  # its step streams, then its payloads
            await self._index().forget_run(run_id)
            await self._runs().forget_run(run_id, info)
            self._forgotten(run_id)
            await blobs.drop(run_id, incarnation, ended, stored, lambda: retention.archived(run_id))

        retention.on_drop = drop
        deleted = await retention.delete_runs(older_than, statuses)
        await self._drop_orphan_blobs()
        return deleted

    async def _drop_orphan_blobs(self) -> None:
        """Delete the blobs of run ids the log does not hold, stored at least the orphan
        grace ago (``wayline.world.blobs.ORPHAN_GRACE_SECONDS``) and not named by the
        archive: a start whose process died between its blob and its append, or whose append
        was refused, left them, and no event will name them. Listed again after the pass's
        deletions, so the blobs those took are not looked at twice."""
        blobs, retention = self._blob_store, self._retention()
        await blobs.names()
        stale = blobs.stale(clock.now() - self._orphan_grace)
        if not stale:
            return
        live = await self._events().run_tokens()
        for token, names in stale.items():
            run_id = token_value(token)
            if token in live or run_id is None:  # a hashed token: its id is not known here
                continue
            kept = await retention.archived(run_id)
            if kept is not None:  # None: a copy does not read, and may name any of them
                await blobs.purge(run_id, [n for n in names if not kept.names(n)])

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        retention = self._retention()
        streams = self._st()
        await self.flush_runs_index()  # an entry written after its run's purge names no run

        async def drop(info: RunInfo, incarnation: str | None, ended: float) -> None:
            await streams.purge_run(info.run_id)  # payloads stay: the archived events name them
            await self._index().forget_run(info.run_id)
            await self._runs().forget_run(info.run_id, info)
            self._forgotten(info.run_id)

        retention.on_drop = drop
        return await retention.archive_runs(older_than, limit)

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

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        return await self._retention().archived_run(run_id)

    async def archived_count(self) -> int:
        return await self._retention().archived_count()

    # lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._nc is not None:
            return
        closes = self._closes
        nc = await self._connect()
        try:
            self._refuse_if_closed(closes)  # close() came while connecting
            self._nc = nc
            js = nc.jetstream(timeout=self._options.request_timeout)
            shown = self._servers_shown
            check_version(nc, shown)
            await check_jetstream(nc, js, shown, self._options.request_timeout)
            if not self._create:
                await _refuse_missing(js, self.names.events_stream, self.prefix, shown)
            await provision(js, self.names, replicas=self.replicas, storage=self.storage, url=shown)
            event_log = EventLog(
                nc,
                js,
                self.names,
                url=shown,
                timeout=self._options.request_timeout,
                on_terminal=self._wake_terminal,
                skew=self.skew,
                gather=self._gather_appends,
            )
            await event_log.start()
            queue = Queue(
                nc,
                js,
                self.names,
                url=shown,
                timeout=self._options.request_timeout,
                visibility=self._visibility,
                replicas=self.replicas,
                memory=self.storage == "memory",
                now=self.skew.now,
                aging_seconds=self._aging,
            )
            await queue.start()
            self._refuse_if_closed(closes)  # close() came while provisioning: nc is closed
        except BaseException as err:
            if self._nc is nc:
                self._nc = None
            await _close_quietly(nc)
            if isinstance(err, Exception) and not isinstance(err, WaylineError):
                # e.g. a bucket lookup timing out while a fresh cluster elects its streams'
                # leaders: the caller handles world errors, not the client library's
                raise wrap(self._servers_shown, "starting the world", err) from err
            raise
        self._nc, self._js, self._log, self._queue = nc, js, event_log, queue
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
            await _close_quietly(nc)

    async def sync_warning(self, monitors: Sequence[str] = ()) -> str | None:
        """The first monitored server that acknowledges before fsync, as one line (a HTTP GET
        per endpoint: the client protocol does not tell)."""
        for monitor in monitors:
            line = sync_line(await read_varz(monitor), monitor)
            if line is not None:
                return line
        return None

    async def _connect(self) -> Any:
        try:
            from nats.aio.client import Client
        except ImportError as err:  # pragma: no cover - nats-py is an optional dependency
            raise ConfigurationError(
                "the NATS world needs nats-py: pip install 'wayline[nats]'"
            ) from err
        opts = self._options
        last: BaseException | None = None
        delay = 0.1
        for attempt in range(opts.connect_attempts):
            nc = Client()
            nc._parse_header_lines = parse_header_lines  # type: ignore[method-assign]
            if opts.asks_tls:
                refuse_plaintext(nc, self._servers_shown)
            errors: list[BaseException] = []

            async def on_error(err: Exception, errors: list[BaseException] = errors) -> None:
                errors.append(err)  # nats-py reports a TLS failure here, then keeps waiting
                await self._on_error(err)

            try:
                # bounded: nats-py can wait forever on a TLS handshake that failed
                await asyncio.wait_for(
                    nc.connect(
                        **opts.connect_kwargs(on_error),
                        disconnected_cb=self._on_disconnect,
                        reconnected_cb=self._on_reconnect,
                    ),
                    timeout=connect_bound(opts.connect_timeout, len(opts.servers)),
                )
            except Exception as err:  # reported below with the URL
                last = err
                await _close_transport(nc, opts.connect_timeout)
                log.debug(
                    "connecting to %s failed (attempt %d): %r",
                    self._servers_shown,
                    attempt + 1,
                    err,
                )
                cause = hopeless([*errors, err], asked_tls=opts.asks_tls)
                if cause is not None:  # the same answer every time: no retries
                    raise ConfigurationError(
                        f"cannot connect to NATS at {self._servers_shown}: {cause}",
                        url=self._servers_shown,
                    ) from err
                if attempt + 1 < opts.connect_attempts:
                    await asyncio.sleep(delay)
                    delay = min(delay * 3, 2.0)
                continue
            # from now on an outage pauses work: the client reconnects (forever by default)
            nc.options["allow_reconnect"] = True
            nc.options["max_reconnect_attempts"] = opts.max_reconnect_attempts
            nc.options["reconnect_time_wait"] = opts.reconnect_time_wait
            return nc
        detail = f"{type(last).__name__}: {last}" if last is not None else "unknown error"
        raise WorldUnavailableError(
            f"cannot connect to NATS at {self._servers_shown} after {opts.connect_attempts} "
            f"attempts ({detail})",
            url=self._servers_shown,
        ) from last

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
        if self._log is not None:  # appends made meanwhile go unheard
            self._log.hints_lost()
        if self._queue is not None:
            self._queue.lost_connection()  # held deliveries are no longer provably ours
        _fail_in_flight(nc, nats.errors.ConnectionReconnectingError)

    async def _on_reconnect(self) -> None:
        log.warning("reconnected to NATS at %s", self._servers_shown)
        self._hints_may_be_lost()  # a run that ended during the outage was not heard

    async def close(self) -> None:
        self._closes += 1
        model, self._runs_model = self._runs_model, None
        if model is not None:
            await model.close()
        writer, self._runs_writer = self._runs_writer, None
        if writer is not None and self._nc is not None and not self._nc.is_closed:
            # a short wait: a close does not wait out requests that get no answer (the
            # in-flight ones fail at once below), and what is left unwritten is repaired
            # from the log by the index's readers
            await writer.close(min(self._options.request_timeout, CLOSE_GRACE))
        elif writer is not None:
            await writer.close(0)
        nc, self._nc = self._nc, None
        if self._queue is not None:
            self._queue.lost_connection()  # a pull in progress ends now, as on a lost one
        if self._log is not None:
            await self._log.close()
        self._js = self._log = self._queue = self._served_kv = None
        self._streams = None
        self._attributes = None
        self._runs_index = None
        self._slots = None
        self._rates = None
        self._hook_buf = None
        if nc is not None:
            import nats.errors

            await _close_quietly(nc)
            # what still waits for a reply waits for nothing now: unavailable at once, not
            # after its request timeout
            _fail_in_flight(nc, nats.errors.ConnectionClosedError)

    def _events(self) -> EventLog:
        if self._log is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._log

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
        log_ = self._events()
        msg_id = uuid.uuid4().hex  # chosen here: a run_created's names its incarnation
        indexed = attribute_index.values_set(events)
        if indexed:  # first: the index stays a superset of the log (see attribute_index)
            await self._index().write(run_id, indexed)
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
            await self._renew_index(run_id, indexed)
        after = log_.cached_info(run_id)
        if stored and after is not None and (before is None or before.status != after.status):
            await self._note_status(after, before, new=stored[0].type is EventType.RUN_CREATED)
        return stored

    async def _note_status(self, info: RunInfo, before: RunInfo | None, *, new: bool) -> None:
        """Note the run's new status for the runs index's writer (``runs_writer``), which
        writes its entry off the append's path: the append has landed and does not wait for
        the index, which is repaired from the log when a write is lost (see ``runs_index``)."""
        try:
            self._writer().note(info, None if new else before, new=new)
        except WaylineError as err:
            log.warning("run %s: runs index not written: %s", info.run_id, err)

    async def _renew_index(self, run_id: str, values: Mapping[str, Any]) -> None:
        """The entries' second publish. The append has landed: a failure here is logged,
        not raised (the caller must not take the append for failed), and costs only the
        protection the renewal gives against a purge (see ``attribute_index``)."""
        try:
            await self._index().write(run_id, values)
        except WaylineError as err:
            log.warning("run %s: search attribute index not renewed: %s", run_id, err)

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        events = await self._events().list_events(run_id, after_seq)
        return await self._out_of_line().resolve(run_id, events)

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self._out_of_line().resolve_info(await self._events().get_run(run_id))

    # blobs (the blob port; a run's blobs are deleted with it by cleanup) ---------------------
    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        incarnation = await self._events().run_incarnation(run_id)
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
        return payload_field(await self._events().get_run(run_id), which)

    async def stored_run(self, run_id: str) -> RunInfo | None:
        return await self._events().get_run(run_id)

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self._events().list_events(run_id, after_seq)

    def _hints_may_be_lost(self) -> None:
        if self._log is not None:  # an id deleted and used again meanwhile went unheard
            self._log.forget_ended()
            self._log.hints_lost()
        super()._hints_may_be_lost()

    async def known_end(self, run_id: str) -> RunInfo | None:
        """From this process's projection: a run whose end it appended or read is not read
        again (a result awaited in the process that drove the run saves a round trip). The
        view is dropped when an append to the run is heard (its id was deleted and used
        again) and whenever a hint may have been lost (``_hints_may_be_lost``)."""
        info = self._events().cached_info(run_id)
        if info is None or not info.status.terminal:
            return None
        return await self._out_of_line().resolve_info(info)

    def log_mark(self, run_id: str) -> str | None:
        return None if self._log is None else self._log.mark(run_id)

    async def read_run_at(self, run_id: str, mark: str) -> tuple[RunInfo | None, list[Event]]:
        held = self._events().view_at(run_id, mark)
        if held is None:
            return await self.read_run(run_id)
        return await self._resolved(run_id, *held)

    async def read_run(self, run_id: str) -> tuple[RunInfo | None, list[Event]]:
        info, events = await self._events().read_run(run_id)
        return await self._resolved(run_id, info, events)

    async def read_run_after(
        self, run_id: str, after_seq: int
    ) -> tuple[RunInfo | None, list[Event]]:
        info, events = await self._events().read_run_after(run_id, after_seq)
        return await self._resolved(run_id, info, events)

    async def _resolved(
        self, run_id: str, info: RunInfo | None, events: list[Event]
    ) -> tuple[RunInfo | None, list[Event]]:
        blobs = self._out_of_line()
        if info is None or info.status.terminal:  # a late message: its status is enough
            return await blobs.resolve_info(info), []
        return await blobs.resolve_info(info), await blobs.resolve(run_id, events)

    def _index(self) -> AttributeIndex:
        if self._attributes is None:
            self._attributes = AttributeIndex(*self._index_parts(), **self._index_options())
        return self._attributes

    def _index_parts(self) -> tuple[Any, Any, Names]:
        """What an index of the runs (``attribute_index``, ``runs_index``) is made of."""
        if self._log is None or self._nc is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self._nc, self._js, self.names

    def _index_options(self) -> dict[str, Any]:
        return {"url": self._servers_shown, "timeout": self._options.request_timeout}

    def _runs(self) -> RunsIndex:
        if self._runs_index is None:
            self._runs_index = RunsIndex(*self._index_parts(), **self._index_options())
        return self._runs_index

    def _writer(self) -> RunsWriter:
        if self._runs_writer is None:
            self._runs_writer = RunsWriter(self._runs())
        return self._runs_writer

    async def _own_writes(self) -> None:
        """A read of the runs index waits (bounded) for this process's own entries: a
        process sees the statuses it wrote, as it did when the append waited for them."""
        await self.flush_runs_index(self._options.request_timeout)

    async def flush_runs_index(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds until this process's runs index entries are written
        (``runs_writer``); False when some are still waiting."""
        return self._runs_writer is None or await self._runs_writer.flush(timeout)

    def _out_of_line(self) -> OutOfLine:
        if self.blobs is None:
            raise WorldUnavailableError(f"world {self.url} is not started (use `async with`)")
        return self.blobs

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        return await self._list(status, workflow, limit, where, since, None)

    async def runs_mark(self) -> int | None:
        # one stream info, where listing the runs reads the last entry of every run
        return await self._events().last_appended()

    async def follow_runs(self) -> None:
        if self._runs_model is None:
            self._runs_model = RunsModel(
                self._index_parts()[0], self._runs(), **self._index_options()
            )
        self._runs_model.start()

    async def runs_followed(self, timeout: float) -> RunsModel | None:
        """The runs index held in memory (``follow_runs``) once loaded, waiting up to
        ``timeout`` seconds for its load; None when not followed or not loaded."""
        model = self._runs_model
        if model is None or not await model.ready(timeout):
            return None
        return model

    def _forgotten(self, run_id: str) -> None:
        if self._runs_model is not None:
            self._runs_model.drop(run_id)

    async def _followed(self) -> RunsModel | None:
        """The runs index in memory, caught up with the index's stream, when it is loaded
        (or loads within ``LOAD_WAIT``); its upkeep (the index's reconciliation with
        the log, sweeps) is started off the read's path."""
        model = self._runs_model
        if model is None:
            return None
        # a read during the load waits for it (bounded) rather than list every name beside
        # it: both at once at 100,000 runs made the listing outlast the request timeout
        if not model.loaded and not await model.ready(LOAD_WAIT):
            return None
        await model.catch_up()
        events, index, names = self._events(), self._runs(), self.names
        model.upkeep(lambda: runs_pages.reconcile(events, index, names))
        return model

    async def runs_page(
        self,
        *,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None = None,
        workflow: str | None = None,
        where: Sequence[Where] = (),
    ) -> list[RunInfo]:
        if where and status is not RunStatus.CORRUPT:
            await self._own_writes()
            model = await self._followed()
            if model is not None:
                return await self._where_page(model, after, limit, status, workflow, where)
        if where or status is RunStatus.CORRUPT:
            # the attribute index names the candidates (a few); only a log says it is corrupt
            return await self._list(status, workflow, limit, where, None, after)
        await self._own_writes()
        model = await self._followed()
        if model is not None:
            return await runs_pages.page_from_model(
                self._events(),
                self._runs(),
                model,
                after=after,
                limit=limit,
                status=status,
                workflow=workflow,
            )
        return await runs_pages.page(
            self._events(),
            self._runs(),
            self.names,
            after=after,
            limit=limit,
            status=status,
            workflow=workflow,
        )

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        if where and all(w.op == "=" for w in where):
            await self._own_writes()
            model = await self._followed()
            if model is not None:  # "=" names its runs exactly: counted by the model
                run_ids, _ = await self._attribute_hits(where)
                return model.counts_of(run_ids, workflow)
        if where:  # the attribute index narrows the runs first, as for a list
            return await super().count_runs(workflow=workflow, where=where)
        await self._own_writes()
        model = await self._followed()
        if model is not None:
            return model.counts(workflow)
        return await runs_pages.counts(self._events(), self._runs(), self.names, workflow)

    async def _list(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        where: Sequence[Where],
        since: float | None,
        after: tuple[float, str] | None,
    ) -> list[RunInfo]:
        if not where:
            return await self._events().list_runs(status, workflow, limit, since=since, after=after)
        run_ids, entries = await self._attribute_hits(where)
        return await self._read_hits(status, workflow, limit, where, since, after, run_ids, entries)

    async def _attribute_hits(
        self, where: Sequence[Where]
    ) -> tuple[set[str], dict[str, list[tuple[str, Any]]]]:
        """The runs the attribute index names for ``where``, each with the entries that named
        it. Every "=" names its runs exactly; an order or "!=" names every run holding the
        key, so it only narrows the candidates when no "=" is given."""
        index = self._index()
        exact = [w for w in where if w.op == "="] or [where[0]]
        found = await asyncio.gather(*(index.candidates(w) for w in exact))
        run_ids = set(found[0]).intersection(*found[1:])
        entries = {run_id: [e for f in found for e in f[run_id]] for run_id in run_ids}
        return run_ids, entries

    async def _where_page(
        self,
        model: RunsModel,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None,
        workflow: str | None,
        where: Sequence[Where],
    ) -> list[RunInfo]:
        """A page filtered by search attributes with the runs index in memory: the attribute
        index names the candidates, the model orders them and cuts them past the cursor, and
        only the page's runs are read from their logs (and judged against ``where`` there)."""
        run_ids, entries = await self._attribute_hits(where)
        keys = model.keys_of(run_ids, after, status, workflow)
        out: list[RunInfo] = []
        at = 0
        while len(out) < limit and at < len(keys):
            chunk = [run_id for _, run_id in keys[at : at + limit - len(out)]]
            at += len(chunk)
            out += await self._read_hits(
                status, workflow, len(chunk), where, None, None, set(chunk), entries
            )
        return out

    async def _read_hits(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        where: Sequence[Where],
        since: float | None,
        after: tuple[float, str] | None,
        run_ids: set[str],
        entries: Mapping[str, list[tuple[str, Any]]],
    ) -> list[RunInfo]:
        """The runs of ``run_ids`` that pass the filters as their logs have them; the
        attribute index's entries that disagree with a log are repaired."""
        index = self._index()
        stale: list[str] = []

        def checked(run_id: str, attributes: Mapping[str, Any] | None) -> None:
            held = search_attributes.stored(attributes or {})
            for subject, row in entries.get(run_id, ()):
                key = subject.rsplit(".", 3)[-3]
                if row not in search_attributes.index_rows(held.get(key)):
                    stale.append(subject)

        out = await self._events().list_runs(
            status,
            workflow,
            limit,
            since=since,
            where=where,
            run_ids=run_ids,
            checked=checked,
            after=after,
        )
        if stale:
            await index.repair(stale, self.now())
        return out

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        return await self._events().repair(run_id, drop_seq)

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
        result: MessageId = await self._q().enqueue(topic, payload, idempotency_key, delay_seconds)
        return result

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        result: list[Delivery] = await self._q().receive(topic, max_messages, wait_seconds)
        return result

    async def ack(self, delivery: Delivery) -> bool:
        return await self._q().ack(delivery)

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return await self._q().retry(delivery, delay_seconds)

    async def release(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return await self._q().release(delivery, delay_seconds)

    async def renew(self, delivery: Delivery) -> bool:
        return await self._q().renew(delivery)

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        return await self._q().dead_letter(delivery, reason)

    async def runs_with_messages(self) -> set[str] | None:
        out: set[str] = set()
        async for _, payload in self._q().stored():
            run_id = payload.get("runId")
            if isinstance(run_id, str):
                out.add(run_id)
        return out

    async def queue_depths(self) -> list[QueueDepth] | None:
        return await self._q().depths()

    async def ready_messages(self, topics: Sequence[str]) -> dict[str, int]:
        return {topic: await self._q().ready(topic) for topic in dict.fromkeys(topics)}

    async def in_flight_messages(self, topics: Sequence[str]) -> dict[str, int]:
        return {topic: await self._q().in_flight(topic) for topic in dict.fromkeys(topics)}

    async def delayed_messages(self, topics: Sequence[str], before: float) -> dict[str, int]:
        return {topic: await self._q().delayed(topic, before) for topic in dict.fromkeys(topics)}

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._q().list_dead_letters(limit)
        return result


_CLOSE_SECONDS = 5.0
"""Bound on a close (flush and drain included): a server that stopped answering must not hold
a worker's shutdown, which has its own grace period to keep."""


async def _refuse_missing(js: Any, stream: str, prefix: str, url: str) -> None:
    import nats.js.errors

    try:
        await js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        raise WorldNotCreatedError(
            f"no world at {url} with prefix {prefix!r}: its stream {stream} does not exist "
            "(check the prefix in --world or WAYLINE_WORLD; a worker or `wayline start` "
            "creates it)",
            url=url,
        ) from None
    except Exception as err:
        raise wrap(url, f"looking for stream {stream}", err) from err


def _fail_in_flight(nc: Any, error: Callable[[], BaseException]) -> None:
    """The requests waiting on the connection's replies fail with ``error()``: the world's
    own (acknowledged publishes, direct gets) and nats-py's."""
    lost_replies(nc, error)
    for future in list((getattr(nc, "_resp_map", None) or {}).values()):
        if not future.done():
            future.set_exception(error())
            future.exception()  # retrieved: one whose request raised at its publish (a
            # request begun as the connection closed) is awaited by no one


async def _close_quietly(nc: Any, bound: float = _CLOSE_SECONDS) -> None:
    await _bounded(nc.close(), bound, "closing the NATS connection")


async def _bounded(aw: Any, bound: float, what: str) -> bool:
    """Await ``aw`` for at most ``bound`` seconds; False (logged) when it failed. A
    CancelledError that is not this task's own (nats-py cancels its close waiters when a TLS
    handshake fails) is a failure like any other."""
    try:
        await asyncio.wait_for(aw, timeout=bound)
        return True
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("%s was cancelled under it", what)
    except Exception as err:  # closing anyway
        log.debug("%s failed: %r", what, err)
    return False


async def _close_transport(nc: Any, bound: float = _CLOSE_SECONDS) -> None:
    """A client whose first connection failed (say, on authorization) may still hold its
    socket; close it so nothing leaks. Bounded: after a failed TLS handshake nats-py's close
    can wait forever."""
    transport = getattr(nc, "_transport", None)
    await _bounded(nc.close(), bound, "closing a failed NATS connection")
    transport = getattr(nc, "_transport", None) or transport
    if transport is not None:
        try:
            transport.close()
        except Exception as err:  # closing anyway
            log.debug("closing a failed NATS transport failed: %r", err)
        await _bounded(transport.wait_closed(), bound, "closing a failed NATS transport")
    _abort(nc)


def _abort(nc: Any) -> None:
    """Cancel what a client left running after a close that did not finish."""
    for name in ("_reading_task", "_flusher_task", "_ping_interval_task", "_reconnection_task"):
        task = getattr(nc, name, None)
        if isinstance(task, asyncio.Task) and not task.done():
            task.cancel()
