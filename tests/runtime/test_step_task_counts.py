"""What a step costs the event loop, on every world: a step body that never suspends runs in
its handler's turn, without the two tasks (an inline batch's and the fence's) it was given
before (``_engine.eager``). Counted with a task factory on the test's own loop, so the
figure is a count, not a timing: at 24efa80 a no-op step made 2.2 tasks on NATS and 2.7-2.8
on SQLite (``bench/steady.py``), and the rest of a step's tasks now come from the world's
own writes, not from its bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline
from tests.runtime.harness import Engine

STEPS = 10
RUNS = 4


@wayline.step(name="task_count_step")
async def counted_step(i: int, pause: float) -> int:
    if pause:  # the body suspends: it needs a task the fence can cancel
        await asyncio.sleep(pause)
    return i


@wayline.workflow(name="task_count_steps")
async def steps(n: int, pause: float) -> int:
    total = 0
    for i in range(n):
        total += await counted_step(i, pause)
    return total


async def _tasks_per_step(engine: Engine, pause: float) -> float:
    loop = asyncio.get_running_loop()
    made = [0]
    before = loop.get_task_factory()

    def counted(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made[0] += 1
        if before is not None:
            return before(loop, coro, **kw)  # type: ignore[call-arg]
        return asyncio.Task(coro, loop=loop, **kw)

    async with engine.worker([steps]):
        # warmed up first: the worker's own long-lived tasks are made on its first run
        assert await (await engine.client.start(steps, STEPS, pause)).result(timeout=30) == 45
        loop.set_task_factory(counted)
        try:
            for _ in range(RUNS):
                handle = await engine.client.start(steps, STEPS, pause)
                assert await handle.result(timeout=30) == 45
        finally:
            loop.set_task_factory(before)
    return made[0] / (RUNS * STEPS)


async def test_a_step_body_that_never_suspends_makes_no_task_of_its_own(engine: Engine) -> None:
    per_step = await _tasks_per_step(engine, 0.0)
    assert per_step < 1.5, f"{per_step:.2f} tasks a step"


async def test_a_step_body_that_suspends_still_gets_its_own_task(engine: Engine) -> None:
    """A body that does suspend still runs in a task of its own, which the fence can cancel
    alone (and its inline batch in another, which lets the handler move on while it runs):
    the cheaper path is taken only where nothing could reach the body meanwhile."""
    quick = await _tasks_per_step(engine, 0.0)
    slow = await _tasks_per_step(engine, 0.01)
    assert slow - quick >= 0.9, (quick, slow)
