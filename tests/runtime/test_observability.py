"""Seed 000's observability: spans ``workflow.execute`` with the inline-ownership attributes,
and the log levels (warn for owned recovery and absorbed duplicates, debug for backstops)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.runtime import flows
from tests.runtime.harness import Engine, wait_for

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _tracing() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


async def test_backstop_arming_is_a_span_attribute_and_a_debug_log(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _EXPORTER.clear()
    marker = str(tmp_path / "m")
    with caplog.at_level(logging.DEBUG, logger="wayline.runtime"):
        async with engine.worker([flows.hook_during_step]):
            handle = await engine.client.start(flows.hook_during_step, marker, 1.0)

            async def started() -> bool:
                return bool(flows.lines(marker))

            await wait_for(started)
            await asyncio.sleep(0.2)
            await engine.client.resume_hook(f"mid-step:{marker}", 1)
            await handle.result(timeout=15)
    spans = [s for s in _EXPORTER.get_finished_spans() if s.name == "workflow.execute"]
    assert spans and all(s.attributes["workflow.run.id"] == handle.run_id for s in spans)
    armed = [s.attributes["workflow.inline_ownership.backstop_wakes_armed"] for s in spans]
    assert sum(armed) == 1  # type: ignore[arg-type]
    recovered = [s.attributes["workflow.inline_ownership.owned_recovery_steps"] for s in spans]
    assert sum(recovered) == 0  # type: ignore[arg-type]
    backstop_logs = [r for r in caplog.records if "backstop wake" in r.getMessage()]
    assert backstop_logs and all(r.levelno == logging.DEBUG for r in backstop_logs)
