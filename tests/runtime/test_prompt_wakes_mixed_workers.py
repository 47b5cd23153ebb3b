"""Waits of every kind woken in process (sleeps, a hook's timeout, a child's deadline)
beside steps, on two workers of one store, many runs at once: the withdrawal of a woken wait's
delayed message never takes a message another wait or a step needs (each run completes, each
wait completes once)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.flows import kid_waits
from tests.runtime.harness import Engine, of_type, settings
from tests.runtime.prompt_wake_flows import pw_tick
from wayline._core.events import EventType

pytestmark = pytest.mark.partitioned


@wayline.workflow(name="rv_mixed")
async def rv_mixed(log: str, token: str, i: int) -> int:
    await pw_tick(log, i)
    await wayline.sleep(0.01)
    try:
        await wayline.create_hook(f"{token}:h", timeout="150ms")
    except wayline.HookTimeout:
        pass
    await wayline.sleep(0.02)
    try:
        await wayline.child_with(wayline.ChildOptions(timeout="200ms"), kid_waits, f"{token}:k")
    except wayline.ChildTimeoutError:
        pass
    await pw_tick(log, i + 100)
    await wayline.sleep(0.01)
    return i


async def test_mixed_waits_woken_in_process_on_two_workers(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "bodies")
    s = settings(prompt_wake_seconds=1.0)
    other = await engine.make_world()
    async with (
        engine.worker([rv_mixed, kid_waits], settings=s) as a,
        engine.worker([rv_mixed, kid_waits], settings=s, world=other) as b,
    ):
        handles = [
            await engine.client.start(rv_mixed, log, f"rv{i}-{tmp_path.name}", i) for i in range(8)
        ]
        got = await asyncio.gather(*(h.result(timeout=90) for h in handles))
        assert got == list(range(8))
        wakes = [a.handler.prompt_wakes, b.handler.prompt_wakes]
        print("prompt", [w.prompt for w in wakes], "retired", [w.retired for w in wakes])
        assert sum(w.prompt for w in wakes) > 0
    assert sorted(flows.lines(log)) == sorted(
        [f"tick {i}" for i in range(8)] + [f"tick {i + 100}" for i in range(8)]
    )
    for h in handles:
        events = await h.events()
        completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
        assert len(completed) == len(set(completed)) == 5, completed
