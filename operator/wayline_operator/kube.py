"""The operator's own writes to the API server beside kopf's (a status from the change feed,
a deletion after a TTL), through the official ``kubernetes`` client. It is blocking, so each
call runs in a thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from .resource import GROUP, PLURAL, VERSION

log = logging.getLogger("wayline.operator")
_api: Any = None


def custom_objects() -> Any:
    global _api
    if _api is None:
        import kubernetes

        try:
            kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        _api = kubernetes.client.CustomObjectsApi()
    return _api


async def patch_status(namespace: str, name: str, status: Mapping[str, Any]) -> bool:
    """Merge ``status`` into the resource's status subresource; False if it is gone."""
    import kubernetes

    def call() -> bool:
        try:
            custom_objects().patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, {"status": dict(status)}
            )
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    return await asyncio.to_thread(call)


async def delete(namespace: str, name: str) -> None:
    """Delete the resource (its finalizer then runs as for any delete); gone is fine."""
    import kubernetes

    def call() -> None:
        try:
            custom_objects().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise

    await asyncio.to_thread(call)
