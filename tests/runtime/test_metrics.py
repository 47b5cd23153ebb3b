"""The worker's Prometheus counters on every world, read from the process's registry around
scenarios that really make them move (the HTTP exposition is tested in tests/cli)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline.errors import RunFailedError
from wayline.world import FLOW_TOPIC
from wayline.world.routing import route_of


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def _lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n


async def test_a_backstop_armed_under_a_live_owner_is_counted(
    engine: Engine, tmp_path: Path
) -> None:
    marker = str(tmp_path / "m")
    before = value("wayline_backstops_armed_total")
    started = value("wayline_step_bodies_started_total", step="slow_marker")
    async with engine.worker([flows.hook_during_step]):
        handle = await engine.client.start(flows.hook_during_step, marker, 1.0)
        await wait_for(lambda: _lines(marker, 1))
        await asyncio.sleep(0.2)
        await engine.client.resume_hook(f"mid-step:{marker}", 1)
        await handle.result(timeout=15)
    assert value("wayline_backstops_armed_total") - before == 1
    assert value("wayline_step_bodies_started_total", step="slow_marker") - started == 1
    assert len(flows.lines(marker)) == 1  # the counter agrees with the body's own record


async def test_owned_recovery_is_counted(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    before = value("wayline_owned_recoveries_total")
    worker = wayline.Worker(engine.world, [flows.looping], settings=settings())
    await worker.start()
    handle = await engine.client.start(flows.looping, log, 4, 2, 30.0)
    await wait_for(lambda: _lines(log, 3))  # blocked inside iteration 2
    await worker.close(graceful=False)
    assert value("wayline_owned_recoveries_total") == before
    async with engine.worker([flows.looping]):
        await handle.result(timeout=15)
    assert flows.lines(log).count("2:2") == 1
    assert value("wayline_owned_recoveries_total") - before == 1


async def test_a_single_flight_absorption_is_counted(engine: Engine) -> None:
    """Two deliveries of one step in one process: the second waits for the first and runs
    nothing. (Since self-fencing, a body can no longer outlive its lease, the old way to make
    this happen in a whole run; the world's own single-flight is driven directly.)"""
    before = value("wayline_single_flight_absorptions_total")
    gate = asyncio.Event()
    ran: list[str] = []

    async def body() -> str:
        ran.append("body")
        await gate.wait()
        return "done"

    flight = engine.world.single_flight
    first = asyncio.create_task(flight.run("wf_x:s1", body))
    await asyncio.sleep(0.01)  # the first holds the key (its body is waiting on the gate)
    assert flight.busy("wf_x:s1") and ran == ["body"]
    second = asyncio.create_task(flight.run("wf_x:s1", body))
    await asyncio.sleep(0.05)
    assert not second.done()  # it waits for the winner's settlement, never returns early
    gate.set()
    assert await first == (True, "done")
    assert await second == (False, None)
    assert ran == ["body"]
    assert value("wayline_single_flight_absorptions_total") - before == 1


async def test_a_run_past_its_delivery_budget_is_counted(engine: Engine, tmp_path: Path) -> None:
    before = value("wayline_delivery_budget_failures_total")
    dead = value("wayline_deliveries_total", topic=FLOW_TOPIC, outcome="ack")
    handle = await engine.client.start(flows.looping, str(tmp_path / "log"), 1, 1, 0.0)
    route = route_of(FLOW_TOPIC, flows.looping)  # a run's messages go to its workflow's route
    for _ in range(3):  # three deliveries that never finished (their workers died)
        [delivery] = await engine.world.receive(route, max_messages=1, wait_seconds=5)
        await engine.world.retry(delivery, 0.0)
    async with engine.worker([flows.looping], settings=settings(max_queue_deliveries=3)):
        with pytest.raises(RunFailedError) as failed:
            await handle.result(timeout=15)
    assert failed.value.cause.code == "MAX_DELIVERIES_EXCEEDED"
    assert value("wayline_delivery_budget_failures_total") - before == 1
    assert value("wayline_deliveries_total", topic=FLOW_TOPIC, outcome="ack") - dead >= 1


@wayline.step(max_retries=0)
async def one_try(path: str) -> str:
    flows.mark(path, f"attempt {wayline.step_context().attempt}")
    await asyncio.sleep(30)
    return "finished"


@wayline.workflow
async def one_try_flow(path: str) -> str:
    return await one_try(path)


async def test_an_owned_recovery_past_its_attempts_is_recorded_failed_and_logged_so(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``max_retries=0`` and the only attempt's delivery died mid-body: the owner records
    ``MAX_ATTEMPTS_EXCEEDED`` ("did not finish in 1 attempt") without running the body
    again. Its warning said the attempt "is re-run", which it is not."""
    log = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [one_try_flow], settings=settings())
    await worker.start()
    handle = await engine.client.start(one_try_flow, log)
    await wait_for(lambda: _lines(log, 1))
    await worker.close(graceful=False)
    with caplog.at_level(logging.WARNING, logger="wayline.runtime"):
        async with engine.worker([one_try_flow]):
            with pytest.raises(RunFailedError, match=r"did not finish in 1 attempt \(its"):
                await handle.result(timeout=15)
    assert flows.lines(log) == ["attempt 1"]  # not run again
    recovered = [r.getMessage() for r in caplog.records if "owned recovery" in r.getMessage()]
    assert recovered and all("past its attempts and recorded failed" in m for m in recovered)
    assert not any("is re-run" in m for m in recovered), recovered
