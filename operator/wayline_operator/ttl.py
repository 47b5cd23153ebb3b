"""``spec.ttlSecondsAfterFinished``: a resource whose run ended deletes itself, as a Job does.
The deletion goes through the official ``kubernetes`` client (in a thread: it is blocking);
the run's history stays in the world."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .resource import GROUP, PLURAL, VERSION

log = logging.getLogger("wayline.operator")
_api: Any = None


def expired(ttl: int | None, status: Mapping[str, Any], now: float) -> bool:
    """Whether a resource with this ``ttl`` and (terminal) ``status`` is due for deletion."""
    ended = status.get("endedAt")
    if ttl is None or not isinstance(ended, str):
        return False
    try:
        at = datetime.strptime(ended, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return False
    return now >= at + ttl


def _custom_objects() -> Any:
    global _api
    if _api is None:
        import kubernetes

        try:
            kubernetes.config.load_incluster_config()
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config()
        _api = kubernetes.client.CustomObjectsApi()
    return _api


async def remove(meta: Mapping[str, Any]) -> None:
    """Delete the resource (its finalizer then runs as for any delete)."""
    import kubernetes

    name, namespace = str(meta.get("name")), str(meta.get("namespace"))
    log.info("deleting WorkflowRun %s/%s: its ttlSecondsAfterFinished passed", namespace, name)

    def call() -> None:
        try:
            _custom_objects().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise

    await asyncio.to_thread(call)
