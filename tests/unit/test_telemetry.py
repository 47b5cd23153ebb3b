"""Trace configuration from the standard OTEL_* variables, in fresh processes (a tracer
provider can be installed once per process)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import json
from opentelemetry import trace
from wayline import telemetry
from wayline.errors import ConfigurationError
try:
    from wayline.settings import Settings
    telemetry.configure("probe", Settings.from_env().otel_env)
except ConfigurationError as err:
    print(json.dumps({"error": str(err)}))
else:
    with trace.get_tracer("t").start_as_current_span("s"):
        carried = telemetry.carry({"runId": "r"})
    print(json.dumps({"provider": type(trace.get_tracer_provider()).__name__, "carried": carried}))
"""


def probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_nothing_configured_installs_nothing_and_carries_nothing() -> None:
    out = probe()
    assert '"provider": "ProxyTracerProvider"' in out
    assert '"carried": {"runId": "r"}' in out


def test_an_otlp_endpoint_installs_the_sdk_and_messages_carry_the_context() -> None:
    out = probe(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_BSP_SCHEDULE_DELAY="60000")
    assert '"provider": "TracerProvider"' in out
    assert '"_trace": {"traceparent": "00-' in out


def test_sdk_disabled_and_exporter_none_install_nothing() -> None:
    assert "ProxyTracerProvider" in probe(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SDK_DISABLED="true"
    )
    assert "ProxyTracerProvider" in probe(OTEL_TRACES_EXPORTER="none")


def test_an_unsupported_exporter_or_protocol_is_a_clear_error() -> None:
    assert "OTEL_TRACES_EXPORTER='zipkin' is not supported" in probe(OTEL_TRACES_EXPORTER="zipkin")
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported" in probe(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="http/json"
    )
