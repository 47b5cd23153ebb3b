"""The operator's Prometheus metrics (``--metrics-port``): handler runs (reconciles) by
handler and result, status patches by handler, Events posted by reason, and each
WorkflowWorker's backlog (what a KEDA ScaledObject can scale on)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kopf

from wayline.metrics import counter, gauge

RECONCILES = counter(
    "wayline_operator_reconciles",
    "Operator handler runs, by handler and result (ok, retry, permanent, error)",
    ("handler", "result"),
)
PATCHES = counter(
    "wayline_operator_status_patches",
    "Status patches the operator's handlers asked for, by handler",
    ("handler",),
)
EVENTS = counter(
    "wayline_operator_events", "Kubernetes Events posted on resources, by reason", ("reason",)
)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def observed(handler: str) -> Callable[[F], F]:
    """Count each run of a kopf handler, and the status patch it leaves (if any)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            result = "error"
            try:
                out = await fn(*args, **kwargs)
                result = "ok"
                return out
            except kopf.TemporaryError:
                result = "retry"
                raise
            except kopf.PermanentError:
                result = "permanent"
                raise
            finally:
                RECONCILES.labels(handler, result).inc()
                patch = kwargs.get("patch")
                if patch is not None and patch.get("status"):
                    PATCHES.labels(handler).inc()

        return run  # type: ignore[return-value]

    return wrap


WORKER_BACKLOG = gauge(
    "wayline_operator_worker_backlog",
    "Ready messages of a WorkflowWorker's current version (what its replicas follow), by "
    "namespace and worker",
    ("namespace", "worker"),
)

WORKER_DUE_SOON = gauge(
    "wayline_operator_worker_due_soon",
    "Delayed messages of a WorkflowWorker's current version that fall due within its "
    "scaleUpLeadSeconds (counted as load before they are ready), by namespace and worker",
    ("namespace", "worker"),
)
