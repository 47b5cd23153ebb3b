"""A message a worker's receive brought with no flow slot free waits in hand for one
(``worker._wait_for_slots``); a graceful close that comes meanwhile hands it back as soon as
the receive loops have ended, not after the handlers settle: a drive that takes the whole
grace to reach its checkpoint would otherwise keep the message, unrenewed, from every other
worker until the close ends or its visibility runs out (an attempt spent)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import wayline
from tests.runtime.harness import Engine, settings, wait_for
from wayline import worker as worker_module
from wayline.world import FLOW_TOPIC, Delivery


@wayline.step(name="in_hand_close_tick")
async def in_hand_close_tick() -> int:
    return 1


@wayline.workflow(name="in_hand_close_flow")
async def in_hand_close_flow() -> int:
    return await in_hand_close_tick()


@wayline.workflow(name="in_hand_close_other")
async def in_hand_close_other() -> int:
    return await in_hand_close_tick()


async def test_a_close_hands_back_a_message_in_hand_before_the_handlers_settle(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every flow topic's receive waits long, so the plain topic's is still waiting when the
    # only slot is taken; a message in hand waits for the slot up to a third of the visibility
    monkeypatch.setattr(worker_module, "_POLL_SECONDS", 20.0)
    monkeypatch.setattr(worker_module, "_IN_HAND_SECONDS", 60.0)
    world = engine.world
    brought: dict[str, str] = {}
    """The route each flow message was received on, by run id."""
    receive = world.receive

    polling: set[str] = set()

    async def watched(topic: str, **kw: Any) -> list[Delivery]:
        polling.add(topic)
        got = list(await receive(topic, **kw))
        brought.update({str((d.payload or {}).get("runId")): topic for d in got})
        return got

    world.receive = watched  # type: ignore[method-assign]
    worker = wayline.Worker(
        world,
        [in_hand_close_flow, in_hand_close_other],
        flow_concurrency=1,
        settings=settings(prompt_wake_seconds=0),
        shutdown_grace_seconds=30.0,
    )
    gate = asyncio.Event()
    driving = asyncio.Event()
    handle_flow = worker.handler.handle_flow

    first: list[str] = []

    async def held(delivery: Delivery) -> Any:
        if (delivery.payload or {}).get("runId") in first:
            driving.set()
            await gate.wait()  # the only slot is held until the test lets go
        return await handle_flow(delivery)

    worker.handler.handle_flow = held  # type: ignore[method-assign]
    await worker.start()

    async def all_polling() -> bool:  # both workflows' two routes and the plain topic
        return len([t for t in polling if t.startswith(FLOW_TOPIC)]) == 5

    await wait_for(all_polling)
    closing: asyncio.Task[None] | None = None
    try:
        first.append((await engine.client.start(in_hand_close_flow)).run_id)
        await asyncio.wait_for(driving.wait(), 20)
        # its start comes on its own route, whose receive is still waiting
        other = (await engine.client.start(in_hand_close_other)).run_id

        async def in_hand() -> bool:
            return other in brought

        await wait_for(in_hand, timeout=20)
        await asyncio.sleep(0.1)  # it waits for the slot now
        closing = asyncio.ensure_future(worker.close())
        world.receive = receive  # type: ignore[method-assign]
        # the close waits for the held drive; the message in hand is another worker's now
        again = await world.receive(brought[other], max_messages=1, wait_seconds=5.0)
        assert [(d.payload or {}).get("runId") for d in again] == [other], (
            "the message in hand was not handed back while the close waited for its handlers"
        )
        for delivery in again:
            await world.release(delivery)
    finally:
        gate.set()
        if closing is None:
            closing = asyncio.ensure_future(worker.close())
        await closing
