"""A cancel never compensates a step whose body is still running (seed 000's decision table
applies to the unwind like to any other wake): the refund comes after the charge ends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, file_exists, of_type, wait_for
from wayline._core.events import EventType

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


@pytest.mark.parametrize("cancellers", [1, 3])
async def test_a_cancel_waits_for_the_running_step_then_compensates(
    engine: Engine, tmp_path: Path, cancellers: int
) -> None:
    marker = str(tmp_path / "m")
    async with engine.worker([flows.pay_then_wait]):
        handle = await engine.client.start(flows.pay_then_wait, marker, 1.5)
        await wait_for(file_exists(marker))
        assert await engine.client.cancel(handle.run_id) is True
        # other workers take the cancel's wake while the body still runs
        async with engine.worker([flows.pay_then_wait], world=await engine.make_world()):
            for _ in range(cancellers - 1):
                await engine.client.cancel(handle.run_id)
            with pytest.raises(wayline.RunCancelledError):
                await handle.result(timeout=30)
    assert flows.lines(marker) == ["forward-start", "forward-end", "compensate"]
    events = await handle.events()
    # the forward's completion was recorded (not dropped), then its compensation's
    completed = [e.correlation_id for e in of_type(events, EventType.STEP_COMPLETED)]
    assert len(completed) == 2 and completed[1] == f"{completed[0]}.c0"
    assert events[-1].type is EventType.RUN_CANCELLED


async def test_a_cancel_waits_for_a_queued_step_body(engine: Engine, tmp_path: Path) -> None:
    """A queue-owned start (bare ``step_started``: a step worker runs the body) has no lease
    to wait on, but its body runs all the same: the unwind waits for it (the soak's
    compensation during a body, a forward attempt re-run from the step queue)."""
    marker = str(tmp_path / "m")
    async with engine.worker([flows.pay_on_retry_then_wait]):
        handle = await engine.client.start(flows.pay_on_retry_then_wait, marker, 1.5)
        await wait_for(file_exists(marker))
        assert await engine.client.cancel(handle.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=30)
    assert flows.lines(marker) == ["forward-start", "forward-end", "compensate"]
    started = of_type(await handle.events(), EventType.STEP_STARTED)
    assert "ownerMessageId" not in started[1].data  # the second attempt was queue-owned


async def test_no_forward_body_starts_once_the_run_is_compensating(
    engine: Engine, tmp_path: Path
) -> None:
    """A step's retry that arrives while the run is being compensated never runs its forward
    body (the unwind has already dealt with the step; a charge after its refund would stand)."""
    marker = str(tmp_path / "m")
    async with engine.worker([flows.reserve_then_charge]):
        handle = await engine.client.start(flows.reserve_then_charge, marker, 3.0)
        await wait_for(_has(marker, "charge-1"))
        assert await engine.client.cancel(handle.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=30)
        await asyncio.sleep(1.5)  # any retry still queued has come due and been handled
    seen = flows.lines(marker)
    assert "charge-2" not in seen, seen
    assert seen[:2] == ["reserve", "charge-1"] and "release-end" in seen


def _has(path: str, line: str) -> Any:
    async def check() -> bool:
        return line in flows.lines(path)

    return check
