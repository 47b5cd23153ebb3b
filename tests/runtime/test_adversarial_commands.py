"""Operator commands racing a live run on every world: ``wake_up`` of a hook's timeout against
the hook's payload, from two clients, with two workers. One of the two wins in the log, the
run's result is the winner's, the after-step runs once, and the ended run does not change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import wayline
from tests.runtime import adversarial_flows as af
from tests.runtime.harness import Engine, wait_for
from wayline._core.events import EventType

RUNS = 8


async def test_wake_up_of_a_hook_timeout_races_its_payload(engine: Engine, tmp_path: Path) -> None:
    marker = str(tmp_path / "m")
    other = wayline.Client(await engine.make_world())
    flow = af.adv_hook_or_timeout
    async with engine.worker([flow]), engine.worker([flow], world=other.world):
        handles = [await engine.client.start(flow, marker, f"t{i}") for i in range(RUNS)]
        for i, h in enumerate(handles):
            await wait_for(lambda i=i: engine.world.get_hook(f"t{i}"))

        async def wake(h: wayline.RunHandle[str]) -> None:
            try:
                await other.wake_up(h.run_id, "h1.timeout")
            except wayline.WaylineError:
                pass  # the payload won, the run moved on (or ended)

        async def resume(i: int) -> None:
            try:
                await engine.client.resume_hook(f"t{i}", i)
            except wayline.HookNotFoundError:
                pass  # the timeout won

        await asyncio.gather(*(wake(h) for h in handles), *(resume(i) for i in range(RUNS)))
        results = [await h.result(timeout=20) for h in handles]
        before = [await h.events() for h in handles]
        await asyncio.sleep(0.5)
        after = [await h.events() for h in handles]
    assert before == after  # an ended run does not change
    for i, (h, events, result) in enumerate(zip(handles, after, results, strict=True)):
        answers = [
            e
            for e in events
            if (e.type is EventType.HOOK_RECEIVED and e.correlation_id == "h1")
            or (e.type is EventType.WAIT_COMPLETED and e.correlation_id == "h1.timeout")
        ]
        first = answers[0]
        expect = "timed out" if first.type is EventType.WAIT_COMPLETED else f"got {i}"
        assert result == expect, (h.run_id, [e.type for e in answers])
    lines = af.lines(marker)
    assert sorted(lines) == sorted(f"t{i} {r}" for i, r in enumerate(results))
