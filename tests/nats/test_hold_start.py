"""The worker times a delivery's hold from when the NATS world's hold began, not from when
the worker got the delivery: a pull answered late (within the world's margin, so the hold
still starts at the pull's send) must not leave the worker's give-up, and its patience for
writes asked again, past the moment the server may redeliver."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import settings, wait_for


@wayline.step(name="hold_start.slow")
async def slow() -> str:
    await asyncio.sleep(2.0)
    return "ok"


@wayline.workflow(name="hold_start.wf")
async def slow_flow() -> str:
    return await slow()


async def test_the_workers_deadline_falls_within_the_worlds_hold(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(visibility_seconds=20.0)  # the world's margin is 4 s
    queue = world._queue
    pull = queue._pull

    async def answered_late(
        consumer: str, request: dict[str, Any], wait: float, *rest: Any
    ) -> list[Any]:
        msgs = await pull(consumer, request, wait, *rest)  # rest: the receive's list
        if msgs:
            await asyncio.sleep(3.5)  # the answer comes late (a loaded server, a slow link)
        return msgs

    queue._pull = answered_late  # type: ignore[method-assign]
    worker = wayline.Worker(world, [slow_flow], settings=settings(), recover=False)
    async with worker:
        await wayline.Client(world).start(slow_flow)

        async def held() -> bool:
            return bool(worker._held)

        await wait_for(held, timeout=30)
        delivery, fence = next(iter(worker._held.values()))
        server_may_redeliver = delivery.handle.fresh_until  # the hold's start + visibility
        deadline = worker._deadline(fence)
        assert deadline < server_may_redeliver - 1.0, (
            f"the worker gives the delivery up {deadline - server_may_redeliver:+.2f}s "
            "relative to when the server may redeliver it"
        )
