"""The operator's own writes to the API server beside kopf's (a status from the change feed,
a deletion after a TTL), through the official ``kubernetes`` client. It is blocking, so each
call runs in a thread of a pool of its own (``WAYLINE_OPERATOR_API_THREADS``, 16): a write
mostly waits for the API server, and the event loop's default pool (cores + 4 threads) would
cap the writes per second at a few times that number over the server's latency."""

from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import hashlib
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .config import settings
from .instance import LEGACY_FINALIZER
from .resource import GROUP, PLURAL, VERSION

log = logging.getLogger("wayline.operator")
THREADS = settings().operator_api_threads
_api: Any = None
_core: Any = None
_pool: ThreadPoolExecutor | None = None
T = TypeVar("T")


def custom_objects() -> Any:
    global _api
    if _api is None:
        import kubernetes

        config = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_incluster_config(config)
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config(client_configuration=config)
        config.connection_pool_maxsize = THREADS  # one connection per thread, kept open
        _api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(config))
    return _api


def core() -> Any:
    """The core API on the same connection pool as ``custom_objects``."""
    global _core
    if _core is None:
        import kubernetes

        _core = kubernetes.client.CoreV1Api(custom_objects().api_client)
    return _core


async def _call(fn: Callable[[], T]) -> T:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="wayline-api")
    return await asyncio.get_running_loop().run_in_executor(_pool, functools.partial(fn))


async def _unless(status: int, fn: Callable[[], object]) -> bool:
    """Make the request; False if the API server answers it with ``status`` (404: gone,
    409: exists already), which is then no error."""
    import kubernetes

    def call() -> bool:
        try:
            fn()
        except kubernetes.client.ApiException as err:
            if err.status == status:
                return False
            raise
        return True

    return await _call(call)


async def patch_status(
    namespace: str, name: str, status: Mapping[str, Any], plural: str = PLURAL
) -> bool:
    """Merge ``status`` into the resource's status subresource (a WorkflowRun's unless
    ``plural`` says); False if it is gone."""
    return await _unless(
        404,
        lambda: custom_objects().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, name, {"status": dict(status)}
        ),
    )


async def exists(body: Mapping[str, Any], plural: str) -> bool:
    """Whether the resource ``body`` describes is still there (False: 404)."""
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    return await _unless(
        404,
        lambda: custom_objects().get_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name
        ),
    )


async def read_key(kind: str, namespace: str, name: str, key: str) -> tuple[str, str | None]:
    """The text at ``key`` of ConfigMap (``kind`` "configmap") or Secret ``name``: ``("",
    text)``, or ``(why not, None)`` when it, or its key, is absent or may not be read."""
    import kubernetes

    def call() -> tuple[str, str | None]:
        try:
            if kind == "configmap":
                data = core().read_namespaced_config_map(name, namespace).data or {}
                text = data.get(key)
            else:
                raw = core().read_namespaced_secret(name, namespace).data or {}
                text = None if key not in raw else base64.b64decode(raw[key]).decode()
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return "does not exist", None
            if err.status == 403:
                return "may not be read by the operator (RBAC: get on it)", None
            raise
        except UnicodeDecodeError:
            return f"key {key!r} is not UTF-8 text", None
        return (f"has no key {key!r}", None) if text is None else ("", text)

    return await _call(call)


async def delete(namespace: str, name: str) -> None:
    """Delete the resource; gone is fine."""
    await _unless(
        404,
        lambda: custom_objects().delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        ),
    )


async def create_run(namespace: str, body: Mapping[str, Any]) -> bool:
    """Create a WorkflowRun; False if one of that name exists already (a tick made twice)."""
    return await _unless(
        409,
        lambda: custom_objects().create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, dict(body)
        ),
    )


async def read_run(namespace: str, name: str) -> dict[str, Any] | None:
    """The WorkflowRun ``name``, None if there is none."""
    import kubernetes

    def call() -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = custom_objects().get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except kubernetes.client.ApiException as err:
            if err.status == 404:
                return None
            raise
        return found

    return await _call(call)


async def list_runs(namespace: str, selector: str) -> list[dict[str, Any]]:
    """The WorkflowRuns of ``namespace`` that match the label ``selector``."""

    def call() -> list[dict[str, Any]]:
        found = custom_objects().list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=selector
        )
        return list(found.get("items") or [])

    return await _call(call)


async def patch_run(
    namespace: str, name: str, patch: Mapping[str, Any], plural: str = PLURAL
) -> None:
    """Merge ``patch`` into a WorkflowRun (a resource of ``plural`` if given); gone is fine."""
    import kubernetes

    def call() -> None:
        try:
            custom_objects().patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, dict(patch)
            )
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise

    await _call(call)


async def release_finalizer(meta: Mapping[str, Any], plural: str, finalizer: str) -> None:
    """Take ``finalizer`` off the resource of ``plural`` that ``meta`` describes. The patch
    names the resource's version, so it never overwrites a list that changed meanwhile: that
    one is left for the next watch event to try again."""
    import kubernetes

    finalizers = [f for f in meta.get("finalizers") or [] if f != finalizer]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
    name = str(meta.get("name"))
    try:
        await patch_run(str(meta.get("namespace")), name, patch, plural)
    except kubernetes.client.ApiException as err:  # 409: changed meanwhile
        log.info("%s %s: finalizer %s stays for now: %s", plural, name, finalizer, err)


async def release_legacy(event_type: str | None, meta: Mapping[str, Any], plural: str) -> None:
    """A resource created under an earlier version carries the finalizer every operator then
    shared (``LEGACY_FINALIZER``), which no operator of this version adds or kopf releases (its
    finalizer is the instance's own): the resource's owner calls this at each watch event, and
    takes it off, so a delete never waits for it."""
    finalizers = meta.get("finalizers") or []
    if event_type != "DELETED" and LEGACY_FINALIZER in finalizers:
        await release_finalizer(meta, plural, LEGACY_FINALIZER)


def event_name(resource: str, uid: str, key: str, reason: str) -> str:
    """An Event's name from what it says, once: the resource's name (cut to leave room) and a
    digest of its uid, the notice's key and reason."""
    digest = hashlib.sha256(f"{uid}/{key}/{reason}".encode()).hexdigest()[:20]
    return f"{resource[:200].rstrip('-.')}.{digest}"


def event_body(
    ref: Mapping[str, Any], notice_type: str, reason: str, message: str, name: str, source: str
) -> dict[str, Any]:
    """A core/v1 Event on ``ref`` (apiVersion, kind, metadata name/namespace/uid) as kopf
    writes one, but under ``name`` instead of a generated one."""
    meta = ref.get("metadata") or {}
    now = datetime.datetime.now(datetime.UTC).isoformat()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta.get("namespace")},
        "type": notice_type,
        "reason": reason,
        "message": message[:1024],
        "action": "Action?",
        "reportingComponent": source,
        "reportingInstance": settings().operator_identity or "dev",
        "source": {"component": source},
        "involvedObject": {
            "apiVersion": ref.get("apiVersion"),
            "kind": ref.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": now,
        "count": 1,
    }


async def create_event(body: Mapping[str, Any]) -> bool:
    """Create the Event; False if one of its name exists (it was posted already: a retried
    sync, a replica taking over, an operator restarted before its status write)."""
    namespace = body["metadata"]["namespace"]
    return await _unless(409, lambda: core().create_namespaced_event(namespace, dict(body)))


def _apps() -> Any:
    import kubernetes

    return kubernetes.client.AppsV1Api(custom_objects().api_client)


async def list_deployments(namespace: str, selector: str) -> list[dict[str, Any]]:
    """The Deployments of ``namespace`` that match the label ``selector``, as plain JSON."""

    def call() -> list[dict[str, Any]]:
        api = _apps()
        found = api.list_namespaced_deployment(namespace, label_selector=selector)
        items: list[dict[str, Any]] = api.api_client.sanitize_for_serialization(found.items)
        return items

    return await _call(call)


async def create_deployment(body: Mapping[str, Any]) -> bool:
    """Create it; False if it exists already (another look made it)."""
    namespace = body["metadata"]["namespace"]
    return await _unless(409, lambda: _apps().create_namespaced_deployment(namespace, dict(body)))


async def scale_deployment(namespace: str, name: str, replicas: int) -> bool:
    """Set its replicas; False if it is gone."""
    patch = {"spec": {"replicas": replicas}}
    return await _unless(404, lambda: _apps().patch_namespaced_deployment(name, namespace, patch))


async def replace_template(
    namespace: str, name: str, template: Mapping[str, Any], digest: str
) -> bool:
    """Write ``template`` over the Deployment's pod template (a JSON patch: lists are replaced,
    not merged, so a variable or volume taken out goes) with its hash; False if it is gone."""
    from .deployments import TEMPLATE_ANNOTATION

    patch = [
        {"op": "replace", "path": "/spec/template", "value": dict(template)},
        {"op": "add", "path": "/metadata/annotations", "value": {TEMPLATE_ANNOTATION: digest}},
    ]
    return await _unless(404, lambda: _apps().patch_namespaced_deployment(name, namespace, patch))


async def delete_deployment(namespace: str, name: str) -> bool:
    """Delete it (its pods get SIGTERM and drain); False if it was gone."""
    return await _unless(404, lambda: _apps().delete_namespaced_deployment(name, namespace))


async def list_pods(namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods of ``namespace`` that match the label ``selector``, as plain JSON."""

    def call() -> list[dict[str, Any]]:
        found = core().list_namespaced_pod(namespace, label_selector=selector)
        items: list[dict[str, Any]] = core().api_client.sanitize_for_serialization(found.items)
        return items

    return await _call(call)


async def annotate_pod(namespace: str, name: str, annotations: Mapping[str, str]) -> bool:
    """Merge ``annotations`` into the pod's; False if it is gone."""
    patch = {"metadata": {"annotations": dict(annotations)}}
    return await _unless(404, lambda: core().patch_namespaced_pod(name, namespace, patch))
