"""The JetStream world: event log, queue, delays and idempotency keys on NATS JetStream."""

from .world import NatsWorld

__all__ = ["NatsWorld"]
