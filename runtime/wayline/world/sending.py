"""Sending a message: the one way the engine, the worker and the client enqueue.

A run's place among ready work (its priority and fairness key, ``_core.ordering``) rides on each
message sent while its work is done: the worker attaches the run's ordering to the context in
which it handles a delivery, and :func:`send` puts it on a payload that carries none. That is
done here, above the seam, so that a world stores what it is given, the ordering fields
included, and a world whose queue orders by them (SQLite, the in-memory world) reads them from
the payload alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core import ordering
from .._core.ids import MessageId
from .ports.queue import WorkQueue


async def send(
    world: WorkQueue,
    topic: str,
    payload: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    delay_seconds: float = 0.0,
    recoverable: bool = False,
) -> MessageId:
    """``world.enqueue`` of ``payload`` with the current context's ordering put on it
    (``ordering.stamp``), unless the payload carries ordering fields already."""
    return await world.enqueue(
        topic,
        ordering.stamp(payload),
        idempotency_key=idempotency_key,
        delay_seconds=delay_seconds,
        recoverable=recoverable,
    )
