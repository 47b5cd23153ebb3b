"""The JetStream world: event log, queue, delays and idempotency keys on NATS JetStream.

    world = NatsWorld("nats://127.0.0.1:4222", prefix="wayline", replicas=1, storage="file")
    world = NatsWorld.from_url("nats://user:pass@h1:4222,h2:4222?prefix=prod&replicas=3")
    async with world: ...

Needs nats-server >= 2.12 with JetStream. ``start()`` creates, per prefix, the streams
``<prefix>_events`` (event log), ``<prefix>_queue`` (work queue + message schedules) and
``<prefix>_dlq`` (dead letters), the KV buckets ``<prefix>_hooks`` and ``<prefix>_idem``, and
one durable consumer per topic on first receive. Modules: ``eventlog`` (append, projections,
hooks, runs), ``queue`` (enqueue, keys, delays, deliveries), ``provision`` (server checks,
streams), ``options`` (connection options, URL form), ``names``, ``codec``, ``direct``.
"""

from .world import NatsWorld

__all__ = ["NatsWorld"]
