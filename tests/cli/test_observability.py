"""What a user switches on for a worker process: Prometheus metrics over HTTP
(``--metrics-port``) and logs as JSON lines or text (``--log-format``), on both worlds."""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import FLOWS, Background, Cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "nats"])
def world_url(request: pytest.FixtureRequest, cli: Cli) -> str:
    if request.param == "sqlite":
        return cli.world
    from tests.nats_fixtures import require_nats

    require_nats()
    server = request.getfixturevalue("nats_server")
    cli.world = f"{server.url}?prefix=t{uuid.uuid4().hex[:12]}"
    return cli.world


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def start_worker(spawn: Callable[..., Background], url: str, *extra: str) -> Background:
    bg: Background = spawn("worker", "--app", str(FLOWS), *extra)  # on cli.world == url
    return bg


def run_to_end(cli: Cli, url: str, target: str, payload: str, status: str) -> str:
    done = cli("start", f"{FLOWS}:{target}", "--input", payload, world=url)
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
