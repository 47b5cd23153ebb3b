"""What ``NatsWorld.start`` checks and creates: server version, JetStream, streams, buckets.

Everything is created idempotently: an existing stream or bucket with the same configuration is
left alone, one with an older configuration is updated.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigurationError, WorldError, WorldUnavailableError
from . import attribute_index, runs_index
from .buckets import Creation, kv_bucket, led, settled
from .codec import wrap
from .names import MAX_PARTITIONS, Names

MIN_SERVER = (2, 12)
"""Message schedules (delays) arrived in nats-server 2.12."""


def check_version(nc: Any, url: str) -> None:
    version = nc.connected_server_version
    found = (int(version.major), int(version.minor))
    if found < MIN_SERVER:
        raise WorldUnavailableError(
            f"NATS at {url} runs nats-server {version.major}.{version.minor}.{version.patch}; "
            f"Wayline needs nats-server >= {MIN_SERVER[0]}.{MIN_SERVER[1]} "
            "(JetStream message schedules)",
            url=url,
        )


async def check_jetstream(nc: Any, js: Any, url: str, timeout: float) -> None:
    import nats.errors
    import nats.js.errors

    info = getattr(nc, "_server_info", None) or {}
    if info.get("jetstream") is False:
        raise WorldUnavailableError(
            f"NATS at {url} has JetStream disabled; start nats-server with -js "
            "(or `jetstream {}` in its configuration)",
            url=url,
        )
    try:
        await js.account_info()
    except (nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError) as err:
        raise WorldUnavailableError(
            f"NATS at {url} has JetStream disabled (or not enabled for this account); "
            "start nats-server with -js",
            url=url,
        ) from err
    except nats.errors.TimeoutError as err:
        raise WorldUnavailableError(
            f"NATS at {url}: JetStream did not answer within {timeout:g}s", url=url
        ) from err
    except Exception as err:
        raise wrap(url, "checking JetStream", err) from err


async def _ensure_stream(js: Any, config: Any, url: str) -> None:
    """Create the stream, or update one made with an older configuration; on a cluster, asked
    again while a create races another process's, and waited for until it has a leader
    (``buckets.settled``)."""
    import nats.js.errors

    async def create_or_update() -> Any:
        try:
            return await js.add_stream(config)
        except nats.js.errors.BadRequestError as err:
            if getattr(err, "err_code", None) != 10058:  # exists with another configuration
                raise
        try:
            return await js.update_stream(config)
        except Exception as err:
            if isinstance(wrap(url, "", err), WorldUnavailableError):
                raise  # no answer (yet): asked again
            raise WorldError(
                f"NATS at {url}: stream {config.name} exists with a configuration Wayline "
                f"cannot update ({err}); delete it or use another prefix",
                url=url,
            ) from err

    await settled(
        create_or_update,
        js,
        config.name,
        url=url,
        what=f"creating stream {config.name}",
        replicas=config.num_replicas or 1,
    )


PARTITIONS_KEY = "partitions"
"""The key of the meta bucket (``Names.meta_bucket``) that records a world's partitions."""


def _mismatch(recorded: int, wanted: int, prefix: str, url: str) -> ConfigurationError:
    return ConfigurationError(
        f"the world at {url} with prefix {prefix!r} was provisioned with {recorded} "
        f"partition{'s' if recorded != 1 else ''}, not the {wanted} asked for (partitions= "
        f"is fixed when a world is made: open it with partitions={recorded}, or make a new "
        "world under another prefix)",
        url=url,
        recorded=recorded,
        wanted=wanted,
    )


async def recorded_partitions(js: Any, names: Names, url: str) -> int:
    """The partitions the world of ``names.prefix`` records (1: none recorded, a world made
    before partitions or with one), without creating anything (``wayline doctor``)."""
    return (await _read_partitions(js, names, url))[1]


async def _read_partitions(
    js: Any, names: Names, url: str, *, replicas: int = 1
) -> tuple[Any, int]:
    """The meta bucket (None when there is none) and the count it records (1: none). A
    replicated bucket is read once it has a leader: another process starting now may have
    just made it (``buckets.led``)."""
    import nats.js.errors

    async def opened() -> Any:
        try:
            return await js.key_value(names.meta_bucket)
        except nats.js.errors.BucketNotFoundError:
            return None

    what = f"opening bucket {names.meta_bucket}"
    stream = f"KV_{names.meta_bucket}"
    # asked again on a timeout: the info of a stream another process is making now waits for
    # its leader; waited for once found
    meta = await settled(opened, js, stream, url=url, what=what, replicas=1)
    if meta is None:
        return None, 1
    if replicas > 1:
        await led(js, stream, url=url, what=what)
    try:
        entry = await meta.get(PARTITIONS_KEY)
    except nats.js.errors.KeyNotFoundError:
        return meta, 1
    except Exception as err:
        raise wrap(url, "reading the world's partitions", err) from err
    return meta, _recorded(entry.value, url)


async def check_partitions(
    js: Any, names: Names, wanted: int, *, replicas: int, storage: str, url: str
) -> None:
    """Refuse (``ConfigurationError`` naming both counts) a world opened with another count
    of partitions than it was made with; record the count of a world made now.

    A world made before partitions, or with one, records nothing and has one: its names are
    today's. A world of N > 1 records N in the meta bucket before any of its streams is made,
    with a create that fails when the key is there, so two processes that make one world at
    once with different counts cannot both win. One start-time request; nothing on the hot
    path."""
    import nats.js.errors

    meta, recorded = await _read_partitions(js, names, url, replicas=replicas)
    if recorded != 1 or wanted == 1:
        if recorded != wanted:
            raise _mismatch(recorded, wanted, names.prefix, url)
        return
    try:  # N > 1 and nothing recorded: a world made before partitions, or a new one
        await js.stream_info(names.events_stream)
    except nats.js.errors.NotFoundError:
        pass
    else:
        # Its events stream is there: a world made before partitions, or one that another
        # process starting now recorded and made since the read above (it records its count
        # before it makes any stream), which a second read tells apart.
        meta, recorded = await _read_partitions(js, names, url, replicas=replicas)
        if recorded != wanted:
            raise _mismatch(recorded, wanted, names.prefix, url)
        return
    if meta is None:
        meta = await kv_bucket(
            js, names.meta_bucket, url=url, create=Creation(replicas, storage == "memory")
        )
    try:
        await meta.create(PARTITIONS_KEY, str(wanted).encode())
    except nats.js.errors.KeyWrongLastSequenceError:  # another process recorded one first
        entry = await meta.get(PARTITIONS_KEY)
        recorded = _recorded(entry.value, url)
        if recorded != wanted:
            raise _mismatch(recorded, wanted, names.prefix, url) from None
    except Exception as err:
        raise wrap(url, "recording the world's partitions", err) from err


def _recorded(value: bytes | None, url: str) -> int:
    try:
        count = int(bytes(value or b"").decode())
    except (UnicodeDecodeError, ValueError):
        count = 0
    if not 1 <= count <= MAX_PARTITIONS:
        raise WorldError(
            f"NATS at {url}: the world's recorded partitions {value!r} is not a count "
            f"from 1 to {MAX_PARTITIONS}; it was not written by Wayline",
            url=url,
        )
    return count


async def _partition_streams(js: Any, names: Names, store: Any, replicas: int, url: str) -> None:
    """The events and queue streams of one partition (``names.part``)."""
    from nats.js.api import DiscardPolicy, RePublish, RetentionPolicy, StreamConfig

    await _ensure_stream(
        js,
        StreamConfig(
            name=names.events_stream,
            description="Wayline event log: one subject per run",
            subjects=[names.events_wildcard],
            retention=RetentionPolicy.LIMITS,
            storage=store,
            num_replicas=replicas,
            discard=DiscardPolicy.OLD,
            allow_direct=True,
            duplicate_window=120.0,
            # appends of concurrent runs are stored as one atomic batch (``gather.py``); a
            # stream made before this is updated to allow them by ``_ensure_stream``
            allow_atomic=True,
            republish=RePublish(
                src=names.events_wildcard, dest=names.stamps_dest, headers_only=True
            ),
        ),
        url,
    )
    await _ensure_stream(
        js,
        StreamConfig(
            name=names.queue_stream,
            description="Wayline queue: messages, delays (message schedules)",
            subjects=[names.queue_wildcard],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=store,
            num_replicas=replicas,
            allow_direct=True,
            allow_msg_schedules=True,
            duplicate_window=120.0,
        ),
        url,
    )


async def provision(
    js: Any, names: Names, *, replicas: int, storage: str, url: str, partitions: int = 1
) -> None:
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig

    store = StorageType.MEMORY if storage == "memory" else StorageType.FILE
    for part in range(partitions):
        await _partition_streams(js, names.partition(part), store, replicas, url)
    # the streams kept by limits, each with its subjects and how many messages a subject keeps
    # (-1, the server's default: all of them; an index keeps the last one a subject)
    kept = [
        (names.dlq_stream, names.dlq_subject, "Wayline dead letters", -1),
        (
            names.archive_stream,
            names.archive_wildcard,
            "Wayline archive: terminal runs moved out of the event log",
            -1,
        ),
        (
            attribute_index.stream_name(names),
            attribute_index.wildcard(names),
            "Wayline search attribute index: a subject per attribute value and run",
            1,
        ),
        (
            runs_index.stream_name(names),
            runs_index.wildcard(names),
            "Wayline runs index: a subject per run naming its status and workflow",
            1,
        ),
    ]
    for name, wildcard, description, per_subject in kept:
        await _ensure_stream(
            js,
            StreamConfig(
                name=name,
                description=description,
                subjects=[wildcard],
                retention=RetentionPolicy.LIMITS,
                storage=store,
                num_replicas=replicas,
                max_msgs_per_subject=per_subject,
                allow_direct=True,
            ),
            url,
        )
    for bucket in (names.hooks_bucket, names.idem_bucket, names.served_bucket):
        await kv_bucket(js, bucket, url=url, create=Creation(replicas, storage == "memory"))
