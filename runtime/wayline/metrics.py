"""Prometheus metrics of a worker (and the operator's, in ``wayline_operator.metrics``).

Counted always (an increment is a few hundred nanoseconds); exposed only when a process
serves them: ``wayline worker --metrics-port N`` starts a small HTTP server of its own
(:func:`serve`). Without ``prometheus_client`` (the ``metrics`` extra) every instrument is a
no-op and :func:`serve` raises a clear error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ConfigurationError

try:
    import prometheus_client as _prom
except ImportError:  # pragma: no cover - the extra is installed in dev
    _prom = None  # type: ignore[assignment]


class _Noop:
    def labels(self, *_: Any, **__: Any) -> _Noop:
        return self

    def inc(self, amount: float = 1.0) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def set(self, value: float) -> None:
        pass


def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
    if _prom is None:
        return _Noop()
    return _prom.Counter(name, doc, labels)


def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
    if _prom is None:
        return _Noop()
    return _prom.Gauge(name, doc, labels)


def histogram(name: str, doc: str, labels: tuple[str, ...] = (), buckets: Any = None) -> Any:
    if _prom is None:
        return _Noop()
    if buckets is None:
        return _prom.Histogram(name, doc, labels)
    return _prom.Histogram(name, doc, labels, buckets=buckets)


_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

DELIVERIES = counter(
    "wayline_deliveries", "Queue deliveries handled, by topic and outcome", ("topic", "outcome")
)
STEP_BODIES_STARTED = counter("wayline_step_bodies_started", "Step bodies started", ("step",))
STEP_BODIES_COMPLETED = counter(
    "wayline_step_bodies_completed", "Step bodies that returned", ("step",)
)
STEP_BODIES_FAILED = counter(
    "wayline_step_bodies_failed", "Step bodies that failed for good", ("step",)
)
STEP_BODIES_RETRIED = counter(
    "wayline_step_bodies_retried", "Step bodies that raised and will be retried", ("step",)
)
OWNED_RECOVERIES = counter(
    "wayline_owned_recoveries",
    "Owned steps re-run by their owning message after a delivery died mid-body (seed 000)",
)
BACKSTOPS_ARMED = counter(
    "wayline_backstops_armed", "Backstop wakes armed for steps owned under a live lease"
)
SINGLE_FLIGHT_ABSORPTIONS = counter(
    "wayline_single_flight_absorptions",
    "Would-be duplicate step executions absorbed by the in-process single-flight",
)
DELIVERY_BUDGET_FAILURES = counter(
    "wayline_delivery_budget_failures",
    "Runs failed because a flow message exceeded WORKFLOW_MAX_QUEUE_DELIVERIES",
)
HISTORIES_LARGE = counter(
    "wayline_histories_large",
    "Runs whose log passed WAYLINE_HISTORY_WARN_EVENTS (each counted once, when its warning "
    "event is recorded)",
)
HISTORY_LIMIT_FAILURES = counter(
    "wayline_history_limit_failures",
    "Runs failed because their log passed WAYLINE_HISTORY_LIMIT_EVENTS",
)
REPLAY_SECONDS = histogram(
    "wayline_replay_seconds", "Time to read a run's log and replay it to its suspension"
)
QUEUE_LAG_SECONDS = histogram(
    "wayline_queue_lag_seconds",
    "Time between a message becoming due and a worker taking it, by topic",
    ("topic",),
    _LAG_BUCKETS,
)


@contextmanager
def timed(histogram: Any) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        histogram.observe(time.perf_counter() - start)


def serve(port: int, host: str = "0.0.0.0") -> Any:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread; returns the server (its
    ``shutdown()`` stops it). Port 0 picks a free port (``server.server_port``)."""
    if _prom is None:
        raise ConfigurationError(
            "--metrics-port needs prometheus_client: pip install 'wayline[metrics]'"
        )
    server, _thread = _prom.start_http_server(port, addr=host)
    return server
