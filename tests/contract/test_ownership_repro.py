"""Seed 000's #2780 repro, on every world: a hook wake mid inline step must not run the body
a second time. Verified in both directions: with the kill switch it runs twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for


async def _repro(engine: Engine, tmp_path: Path, ownership: bool) -> list[str]:
    marker = str(tmp_path / f"marker-{ownership}")
    async with engine.worker(
        [flows.hook_during_step], settings=settings(inline_ownership=ownership)
    ):
        handle = await engine.client.start(flows.hook_during_step, marker, 1.5)

        async def body_started() -> bool:
            return bool(flows.lines(marker))

        await wait_for(body_started)
        await asyncio.sleep(0.4)  # ~0.4 s into the 1.5 s body
        await engine.client.resume_hook(f"mid-step:{marker}", {"ok": True})
        result = await handle.result(timeout=20)
        assert result == ["done", {"ok": True}]
        await asyncio.sleep(0.3)  # let a duplicate (if any) write its marker
    return flows.lines(marker)


async def test_hook_wake_mid_inline_step_runs_the_body_once(engine: Engine, tmp_path: Path) -> None:
    assert await _repro(engine, tmp_path, ownership=True) == ["attempt 1"]


async def test_kill_switch_brings_the_duplicate_back(engine: Engine, tmp_path: Path) -> None:
    marks = await _repro(engine, tmp_path, ownership=False)
    assert len(marks) == 2, marks


@pytest.mark.parametrize("ownership", [True])
async def test_sleep_wake_mid_inline_step_runs_the_body_once(
    engine: Engine, tmp_path: Path, ownership: bool
) -> None:
    marker = str(tmp_path / "marker")
    async with engine.worker(
        [flows.sleep_during_step], settings=settings(inline_ownership=ownership)
    ):
        handle = await engine.client.start(flows.sleep_during_step, marker, 1.0)
        assert await handle.result(timeout=20) == "sleep won"
        # the step keeps running after the race is decided; wait for it to settle
        await asyncio.sleep(1.2)
    assert flows.lines(marker) == ["attempt 1"]
