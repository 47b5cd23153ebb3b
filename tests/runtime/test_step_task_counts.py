"""What a step costs the event loop, on every world: a step body and its inline batch run in
tasks that take their first step at once (``_engine.eager``), so no task of a step body goes
through the loop's ``create_task`` and waits a turn to begin. Counted with a task factory on the
test's own loop and a count of the eager tasks made, so the figures are counts, not timings:
at 7964aab a no-op step made 2.2 loop tasks on NATS and 2.7-2.8 on SQLite (``bench/steady.py``)
and no eager task; the rest of a step's loop tasks now come from the world's own writes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

import wayline
from tests.runtime.harness import Engine
from wayline._engine import eager

STEPS = 10
RUNS = 4


@wayline.step(name="task_count_step")
async def counted_step(i: int, pause: float) -> int:
    if pause:  # the body suspends: its task waits for the loop from then on
        await asyncio.sleep(pause)
    return i


@wayline.workflow(name="task_count_steps")
async def steps(n: int, pause: float) -> int:
    total = 0
    for i in range(n):
        total += await counted_step(i, pause)
    return total


async def _tasks_per_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, pause: float
) -> tuple[float, float]:
    """(tasks made by the loop, eager tasks made) per step."""
    loop = asyncio.get_running_loop()
    made, eagerly = [0], [0]
    before = loop.get_task_factory()
    start = eager.start

    def counted(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made[0] += 1
        if before is not None:
            return before(loop, coro, **kw)  # type: ignore[call-arg]
        return asyncio.Task(coro, loop=loop, **kw)

    def counted_eagerly(coro: Coroutine[Any, Any, Any], name: str | None = None, **kw: Any) -> Any:
        eagerly[0] += 1
        return start(coro, name=name, **kw)  # ``loop=`` where the engine holds it

    async with engine.worker([steps]):
        # warmed up first: the worker's own long-lived tasks are made on its first run
        assert await (await engine.client.start(steps, STEPS, pause)).result(timeout=30) == 45
        loop.set_task_factory(counted)
        monkeypatch.setattr(eager, "start", counted_eagerly)
        try:
            for _ in range(RUNS):
                handle = await engine.client.start(steps, STEPS, pause)
                assert await handle.result(timeout=30) == 45
        finally:
            loop.set_task_factory(before)
            monkeypatch.setattr(eager, "start", start)
    return made[0] / (RUNS * STEPS), eagerly[0] / (RUNS * STEPS)


async def test_a_step_body_that_never_suspends_makes_no_loop_task(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its body's task and its inline batch's are eager: two a step, none from the loop."""
    loop_tasks, eager_tasks = await _tasks_per_step(engine, monkeypatch, 0.0)
    assert loop_tasks < 1.5, f"{loop_tasks:.2f} loop tasks a step"
    assert eager_tasks >= 2.0, f"{eager_tasks:.2f} eager tasks a step"


async def test_a_step_body_that_suspends_still_runs_in_its_own_task(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body that suspends runs on in the task it began in (which the fence can cancel alone,
    and its inline batch in another, which lets the handler move on meanwhile): it makes as
    many eager tasks as a body that does not."""
    quick = await _tasks_per_step(engine, monkeypatch, 0.0)
    slow = await _tasks_per_step(engine, monkeypatch, 0.01)
    assert slow[1] == quick[1], (quick, slow)
