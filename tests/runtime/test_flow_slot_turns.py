"""With fewer flow slots than flow topics, a topic whose receive loop waits for a slot gets a
turn when one frees: another topic's backlog does not take every freed slot first. Counted in
drives, not timed: how many drives of the backlog begin after the lone run's start is stored
and before its own drive begins."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline
from tests.runtime.harness import Engine, settings, wait_for
from wayline.world import Delivery


@wayline.workflow(name="flow_slot_turns_busy")
async def flow_slot_turns_busy(i: int) -> int:
    return i


@wayline.workflow(name="flow_slot_turns_lone")
async def flow_slot_turns_lone() -> str:
    return "lone"


async def test_a_topic_waiting_for_the_only_flow_slot_is_not_starved_by_a_backlog(
    engine: Engine,
) -> None:
    backlog = 150
    busy = [await engine.client.start(flow_slot_turns_busy, i) for i in range(backlog)]
    busy_ids = {h.run_id for h in busy}
    drives: list[str] = []
    async with engine.worker(
        [flow_slot_turns_busy, flow_slot_turns_lone],
        flow_concurrency=1,
        settings=settings(prompt_wake_seconds=0),
    ) as worker:
        handle_flow = worker.handler.handle_flow

        async def slow(delivery: Delivery) -> Any:
            run_id = str((delivery.payload or {}).get("runId"))
            drives.append("busy" if run_id in busy_ids else run_id)
            await asyncio.sleep(0.05)  # the only slot is held a while by each drive
            return await handle_flow(delivery)

        worker.handler.handle_flow = slow  # type: ignore[method-assign]

        async def backlog_under_way() -> bool:
            return len(drives) >= 20

        await wait_for(backlog_under_way, timeout=60)
        before = len(drives)
        lone = await engine.client.start(flow_slot_turns_lone)
        assert await lone.result(timeout=120) == "lone"
        for handle in busy:
            await handle.result(timeout=120)
    turn = drives.index(lone.run_id) - before
    # its loops ask first when the slot frees next (a drive or two, as the start is stored).
    # Woken by one event, the backlog's loop, first each time, took every freed slot: the
    # lone workflow's loops, which came after it at the worker's start, never even polled
    # until the backlog was done
    assert turn <= 3, (turn, backlog - before)
