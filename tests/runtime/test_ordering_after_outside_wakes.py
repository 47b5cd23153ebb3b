"""A run's place among ready work (``StartOptions(priority=, fairness_key=)``) holds for its
whole life, on both worlds: a wake sent from outside the run (a client resuming its hook,
an unpause, a redrive, a recovery sweep) carries no ordering, and the messages the run sends
after it still carry the run's own, as its ``run_created`` records it."""

from __future__ import annotations

from typing import Any

import wayline
from tests.runtime.harness import Engine, settings
from wayline._core.ordering import Ordering, of_payload
from wayline.world import FLOW_TOPIC, Delivery, World


@wayline.workflow(name="ordering_follow.waits_then_naps")
async def waits_then_naps(token: str) -> str:
    got: str = await wayline.create_hook(token)
    await wayline.sleep(0.05)  # its wake is a message the worker sends after the resume
    return got


def record_flow(world: World, run_id: list[str]) -> list[dict[str, Any]]:
    """The payloads of the flow deliveries of the run whose id ``run_id`` will hold."""
    seen: list[dict[str, Any]] = []
    receive = world.receive

    async def receiving(topic: str, **kwargs: Any) -> list[Delivery]:
        got = await receive(topic, **kwargs)
        for d in got:
            payload = d.payload or {}
            if d.topic == FLOW_TOPIC and run_id and payload.get("runId") == run_id[0]:
                seen.append(payload)
        return got

    world.receive = receiving  # type: ignore[method-assign]
    return seen


async def test_a_run_keeps_its_priority_after_a_client_resumes_its_hook(engine: Engine) -> None:
    ids: list[str] = []
    seen = record_flow(engine.world, ids)
    options = wayline.StartOptions(priority=2, fairness_key="acme")
    # the sleep's wake is a delivery of its own, not woken in the process that drove the run
    # (``prompt_wakes``), so that the message the run sent after the resume is seen here
    async with engine.worker([waits_then_naps], settings=settings(prompt_wake_seconds=0)):
        handle = await engine.client.start_with(options, waits_then_naps, "tok-follow")
        ids.append(handle.run_id)
        await engine.client.wait_for_hook("tok-follow", timeout=20)
        await engine.client.resume_hook("tok-follow", "go")
        assert await handle.result(timeout=20) == "go"
    reasons = [p.get("reason") for p in seen]
    resumed = reasons.index("hook")  # the client's wake: no ordering of its own
    assert of_payload(seen[resumed]) == Ordering()
    after = seen[resumed + 1 :]
    assert after, reasons  # the sleep's wake, sent by the worker
    assert {of_payload(p) for p in after} == {Ordering(2, "acme", 1)}, after
