"""A cancel never compensates a step whose body is still running (seed 000's decision table
applies to the unwind like to any other wake): the refund comes after the charge ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, file_exists, of_type, wait_for
from wayline._core.events import EventType


async def _refund(path: str, seconds: float) -> None:
    flows.mark(path, "compensate")


@wayline.step(name="cancel_tests.charge", compensate=_refund)
async def charge(path: str, seconds: float) -> str:
    flows.mark(path, "forward-start")
    await asyncio.sleep(seconds)
    flows.mark(path, "forward-end")
    return "ch_1"


@wayline.workflow(name="cancel_tests.pay")
async def pay(path: str, seconds: float) -> str:
    await charge(path, seconds)
    return str(await wayline.create_hook(f"pay:{path}"))


@pytest.mark.parametrize("cancellers", [1, 3])
async def test_a_cancel_waits_for_the_running_step_then_compensates(
    engine: Engine, tmp_path: Path, cancellers: int
) -> None:
    marker = str(tmp_path / "m")
    async with engine.worker([pay]):
        handle = await engine.client.start(pay, marker, 1.5)
        await wait_for(file_exists(marker))
        assert await engine.client.cancel(handle.run_id) is True
        # other workers take the cancel's wake while the body still runs
        async with engine.worker([pay], world=await engine.make_world()):
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
