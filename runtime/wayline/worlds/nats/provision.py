"""What ``NatsWorld.start`` checks and creates: server version, JetStream, streams, buckets.

Everything is created idempotently: an existing stream or bucket with the same configuration is
left alone, one with an older configuration is updated.
"""

from __future__ import annotations

from typing import Any

from ...errors import WorldError, WorldUnavailableError
from . import attribute_index, runs_index
from .buckets import Creation, kv_bucket
from .codec import wrap
from .names import Names

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
    import nats.js.errors

    try:
        await js.add_stream(config)
        return
    except nats.js.errors.BadRequestError as err:
        if getattr(err, "err_code", None) != 10058:  # exists with another configuration
            raise wrap(url, f"creating stream {config.name}", err) from err
    except Exception as err:
        raise wrap(url, f"creating stream {config.name}", err) from err
    try:
        await js.update_stream(config)
    except Exception as err:
        raise WorldError(
            f"NATS at {url}: stream {config.name} exists with a configuration Wayline cannot "
            f"update ({err}); delete it or use another prefix",
            url=url,
        ) from err


async def provision(js: Any, names: Names, *, replicas: int, storage: str, url: str) -> None:
    from nats.js.api import (
        DiscardPolicy,
        RePublish,
        RetentionPolicy,
        StorageType,
        StreamConfig,
    )

    store = StorageType.MEMORY if storage == "memory" else StorageType.FILE
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
    await _ensure_stream(
        js,
        StreamConfig(
            name=names.dlq_stream,
            description="Wayline dead letters",
            subjects=[names.dlq_subject],
            retention=RetentionPolicy.LIMITS,
            storage=store,
            num_replicas=replicas,
            allow_direct=True,
        ),
        url,
    )
    await _ensure_stream(
        js,
        StreamConfig(
            name=names.archive_stream,
            description="Wayline archive: terminal runs moved out of the event log",
            subjects=[names.archive_wildcard],
            retention=RetentionPolicy.LIMITS,
            storage=store,
            num_replicas=replicas,
            allow_direct=True,
        ),
        url,
    )
    indexes = {
        attribute_index.stream_name(names): (
            attribute_index.wildcard(names),
            "Wayline search attribute index: a subject per attribute value and run",
        ),
        runs_index.stream_name(names): (
            runs_index.wildcard(names),
            "Wayline runs index: a subject per run naming its status and workflow",
        ),
    }
    for name, (wildcard, description) in indexes.items():
        await _ensure_stream(
            js,
            StreamConfig(
                name=name,
                description=description,
                subjects=[wildcard],
                retention=RetentionPolicy.LIMITS,
                storage=store,
                num_replicas=replicas,
                max_msgs_per_subject=1,
                allow_direct=True,
            ),
            url,
        )
    for bucket in (names.hooks_bucket, names.idem_bucket, names.served_bucket):
        await kv_bucket(js, bucket, url=url, create=Creation(replicas, storage == "memory"))
