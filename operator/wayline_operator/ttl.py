"""``spec.ttlSecondsAfterFinished``: a resource whose run ended deletes itself, as a Job does.
The deletion goes through the official ``kubernetes`` client (``kube``); the run's history
stays in the world."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .kube import delete

log = logging.getLogger("wayline.operator")


def ended_at(status: Mapping[str, Any]) -> float | None:
    """``status.endedAt`` as seconds since the epoch, if the run ended."""
    ended = status.get("endedAt")
    if not isinstance(ended, str):
        return None
    try:
        return datetime.strptime(ended, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def due_in(ttl: int | None, status: Mapping[str, Any], now: float) -> float | None:
    """Seconds until a resource with this ``ttl`` and (terminal) ``status`` is to be deleted
    (0 or less: now); None when it is never deleted."""
    at = ended_at(status)
    if ttl is None or at is None:
        return None
    return at + ttl - now


def expired(ttl: int | None, status: Mapping[str, Any], now: float) -> bool:
    """Whether a resource with this ``ttl`` and (terminal) ``status`` is due for deletion."""
    left = due_in(ttl, status, now)
    return left is not None and left <= 0


async def remove(meta: Mapping[str, Any]) -> None:
    """Delete the resource (its run, ended, needs no cancel)."""
    name, namespace = str(meta.get("name")), str(meta.get("namespace"))
    log.info("deleting WorkflowRun %s/%s: its ttlSecondsAfterFinished passed", namespace, name)
    await delete(namespace, name)
