"""What a user switches on for a worker process: Prometheus metrics over HTTP
(``--metrics-port``), logs as JSON lines or text (``--log-format``) and OTLP traces (the
standard ``OTEL_*`` variables), on both worlds."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import wayline

from .conftest import FLOWS, Background, Cli

RELAY = Path(__file__).with_name("relay_flows.py")

pytestmark = pytest.mark.timeout(60)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def start_worker(
    spawn: Callable[..., Background], url: str, *extra: str, app: Path = FLOWS
) -> Background:
    # one process: its metrics and log lines are the whole worker's
    bg: Background = spawn("worker", "--app", str(app), "--processes", "1", *extra)
    return bg


def run_to_end(cli: Cli, url: str, target: str, payload: str, status: str) -> str:
    done = cli.here("start", f"{FLOWS}:{target}", "--input", payload, world=url)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().split()[-1]
    cli.wait_status(run_id, status, timeout=20)
    return run_id


def test_worker_metrics_are_scraped_over_http_after_real_runs(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    bg = start_worker(spawn, world_url, "--metrics-port", "0", "--metrics-host", "127.0.0.1")
    err = bg.wait_for("/metrics", timeout=20)
    port = int(re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", err).group(1))  # type: ignore[union-attr]
    bg.wait_for("ready on")
    run_to_end(cli, world_url, "add", "[2, 3]", "completed")
    run_to_end(cli, world_url, "broken", '"out of stock"', "failed")
    got = scrape(port)

    def v(name: str, **labels: str) -> float:
        return got.get((name, tuple(sorted(labels.items()))), 0.0)

    # the flaky step ran twice: once retried, once completed; explode failed once for good
    assert v("wayline_step_bodies_started_total", step="cli_tests.flaky") == 2
    assert v("wayline_step_bodies_retried_total", step="cli_tests.flaky") == 1
    assert v("wayline_step_bodies_completed_total", step="cli_tests.flaky") == 1
    assert v("wayline_step_bodies_failed_total", step="cli_tests.explode") == 1
    assert v("wayline_step_bodies_started_total", step="cli_tests.explode") == 1
    assert v("wayline_deliveries_total", topic="flow", outcome="ack") >= 2
    assert v("wayline_deliveries_total", topic="flow", outcome="dead") == 0
    assert v("wayline_replay_seconds_count") >= 2
    assert v("wayline_queue_lag_seconds_count", topic="flow") >= 2
    # a clean run recovers nothing, arms no backstop, absorbs nothing, exhausts no budget
    for name in (
        "wayline_owned_recoveries_total",
        "wayline_backstops_armed_total",
        "wayline_single_flight_absorptions_total",
        "wayline_delivery_budget_failures_total",
    ):
        assert (name, ()) in got and got[(name, ())] == 0, name


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_json_logs_say_when_runs_start_and_end_and_steps_retry(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    bg = start_worker(spawn, world_url, "--log-format", "json")
    bg.wait_for("ready on", timeout=20)
    run_id = run_to_end(cli, world_url, "add", "[2, 3]", "completed")
    bg.wait_for(f"run {run_id} completed")
    records = json_lines(bg.output()[1])  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    mine = [r for r in records if r.get("run_id") == run_id]
    started = [r for r in mine if r["message"].startswith(f"run {run_id} started")]
    retried = [r for r in mine if "will be retried" in r["message"]]
    ended = [r for r in mine if r["message"] == f"run {run_id} completed"]
    assert len(started) == 1 and started[0]["level"] == "INFO"
    assert started[0]["workflow"] == "add"
    assert len(retried) == 1 and retried[0]["level"] == "INFO"
    assert retried[0]["step"] == "cli_tests.flaky" and "transient" in retried[0]["message"]
    assert len(ended) == 1 and ended[0]["level"] == "INFO"
    assert mine.index(started[0]) < mine.index(retried[0]) < mine.index(ended[0])


def test_text_logs_say_the_same_at_info(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    bg = start_worker(spawn, world_url)
    bg.wait_for("ready on", timeout=20)
    run_id = run_to_end(cli, world_url, "add", "[2, 3]", "completed")
    err = bg.wait_for(f"run {run_id} completed")
    assert re.search(rf"INFO wayline\.runtime: run {run_id} started: workflow add", err)
    assert re.search(
        rf"INFO wayline\.runtime: run {run_id} step cli_tests\.flaky \(\S+\) will be retried", err
    )
    assert not err.lstrip().startswith("{")


class Collector:
    """An OTLP/HTTP trace receiver on loopback: what the workers' exporters send."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.spans: list[dict[str, Any]] = []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for rs in request.resource_spans:
                    resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            collector.spans.append(
                                {
                                    "name": span.name,
                                    "trace": span.trace_id.hex(),
                                    "id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex(),
                                    "worker": resource.get("wayline.test.worker"),
                                    "attributes": {a.key: _value(a.value) for a in span.attributes},
                                }
                            )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def log_of(url: str, run_id: str) -> list[str]:
    async def read() -> list[str]:
        async with wayline.open_world(url) as world:
            return [str(e.type) for e in await world.list_events(run_id)]

    return asyncio.run(read())


def test_a_run_is_one_trace_across_two_worker_processes(
    cli: Cli, spawn: Callable[..., Background], world_url: str, collector: Collector
) -> None:
    """Worker A runs the first step and arms the sleep's wake; it stops; worker B takes the
    wake and finishes. Both export over OTLP (standard OTEL_* variables): one trace."""
    base = dict(cli.env)
    cli.env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_RESOURCE_ATTRIBUTES="wayline.test.worker=a",
    )
    a = start_worker(spawn, world_url, app=RELAY)
    a.wait_for("ready on", timeout=20)
    done = cli("start", f"{RELAY}:relay", "--input", '["hi", 2.0]', world=world_url)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().split()[-1]
    deadline = time.monotonic() + 20
    while "wait_created" not in log_of(world_url, run_id):
        assert time.monotonic() < deadline, log_of(world_url, run_id)
        time.sleep(0.1)
    assert a.stop() == 0  # graceful: its spans are flushed on the way out
    cli.env.update(OTEL_RESOURCE_ATTRIBUTES="wayline.test.worker=b")
    b = start_worker(spawn, world_url, app=RELAY)
    cli.env.clear()
    cli.env.update(base)
    cli.wait_status(run_id, "completed", timeout=20)
    assert b.stop() == 0
    spans = [s for s in collector.spans if s["attributes"].get("workflow.run.id") == run_id]
    by_worker = {w: [s for s in spans if s["worker"] == w] for w in ("a", "b")}
    assert by_worker["a"] and by_worker["b"], spans
    assert len({s["trace"] for s in spans}) == 1  # one trace across both processes
    a_ids = {s["id"] for s in by_worker["a"]}
    b_exec = [s for s in by_worker["b"] if s["name"] == "workflow.execute"]
    assert b_exec and all(s["parent"] in a_ids for s in b_exec)  # B continues A's trace
    steps = sorted((s for s in spans if s["name"] == "workflow.step"), key=lambda s: s["worker"])
    assert [s["worker"] for s in steps] == ["a", "b"]  # one span per step body, once each
    for s in steps:
        attrs = s["attributes"]
        assert attrs["workflow.step.name"] == "relay_tests.shout"
        assert attrs["workflow.inline_ownership.owned"] is True
        assert attrs["workflow.inline_ownership.owned_recovery"] is False
        assert attrs["workflow.inline_ownership.owner_message_id"]
        assert attrs["workflow.step.outcome"] == "completed"
    for s in (s for s in spans if s["name"] == "workflow.execute"):
        assert s["attributes"]["workflow.inline_ownership.owned_recovery_steps"] == 0
        assert "workflow.inline_ownership.backstop_wakes_armed" in s["attributes"]
