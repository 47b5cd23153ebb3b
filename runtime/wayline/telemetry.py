"""Traces: configured in one place, carried in queue messages.

:func:`configure` is the only place that installs an OpenTelemetry SDK: it does so when the
standard ``OTEL_*`` variables ask for an exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER``), honours
``OTEL_SDK_DISABLED``, and leaves a tracer provider the application installed itself alone.
Nothing configured means the API's no-op tracer: spans cost a function call and nothing is
carried on the queue.

A message enqueued under a recording span carries its W3C trace context in the payload
(:data:`TRACE_KEY`); the delivery that takes it continues that trace (:func:`attached`), so a
run is one trace across workers.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, propagate, trace

from .errors import ConfigurationError

log = logging.getLogger("wayline.telemetry")

TRACE_KEY = "_trace"
"""The payload field that carries ``traceparent`` (and ``tracestate``) between workers."""

_ASKS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)


def carry(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload to store: with the current trace context when a span is recording."""
    out = dict(payload)
    span = trace.get_current_span()
    if span.is_recording() and span.get_span_context().is_valid:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if carrier:
            out[TRACE_KEY] = carrier
    return out


@contextmanager
def attached(payload: Mapping[str, Any] | None) -> Iterator[None]:
    """Run the body under the trace context a delivery carries (if any)."""
    carrier = payload.get(TRACE_KEY) if isinstance(payload, Mapping) else None
    if not isinstance(carrier, Mapping):
        yield
        return
    ctx = propagate.extract({str(k): str(v) for k, v in carrier.items()})
    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def configure(service_name: str, env: Mapping[str, str]) -> Callable[[], None]:
    """Install the SDK when ``OTEL_*`` (``env``: ``Settings.otel_env``) asks for it; returns a
    shutdown that flushes spans."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return _nothing
    wanted = [v for v in _ASKS if env.get(v, "").strip()]
    if not wanted:
        return _nothing
    exporters = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    exporters = [e for e in exporters if e and e != "none"]
    if not exporters:
        return _nothing
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("a tracer provider is already installed: OTEL_* configuration left to it")
        return _nothing
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as err:
        raise ConfigurationError(
            f"{', '.join(wanted)} asks for traces, which need the SDK: pip install 'wayline[otel]'"
        ) from err
    attributes: dict[str, Any] = {}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    ):
        attributes["service.name"] = service_name
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    trace.set_tracer_provider(provider)
    log.info("traces exported (%s)", ", ".join(exporters))
    return provider.shutdown


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER={name!r} is not supported here (use otlp, console or none)"
        )
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in ("grpc", "http/protobuf"):
        raise ConfigurationError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported (use http/protobuf or grpc)"
        )
    module = "grpc" if protocol == "grpc" else "http"
    try:
        found = importlib.import_module(
            f"opentelemetry.exporter.otlp.proto.{module}.trace_exporter"
        )
    except ImportError as err:
        raise ConfigurationError(
            f"the OTLP {protocol} exporter is not installed: pip install 'wayline[otel]'"
            + (" opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else "")
        ) from err
    return found.OTLPSpanExporter()


def _nothing() -> None:
    pass
