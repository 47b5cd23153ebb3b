"""Replay cost per step does not grow with the log, on every world: a run driven by one
delivery reads its log once, and the events the engine reads back from the world stay the
same whether the run has 20 steps or 200 (``bench/long_history.py`` measures the CPU)."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

from tests.runtime import history_limit_flows as flows
from tests.runtime.harness import Engine, settings
from wayline.world import World


def _counted(world: World, read: Counter[str]) -> None:
    """Count the events every read of a run's log returns."""
    list_events, read_run, read_run_at = world.list_events, world.read_run, world.read_run_at

    async def list_counted(run_id: str, *args: Any, **kwargs: Any) -> Any:
        events = await list_events(run_id, *args, **kwargs)
        read[run_id] += len(events)
        return events

    async def read_counted(run_id: str) -> Any:
        info, events = await read_run(run_id)
        read[run_id] += len(events)
        return info, events

    async def read_at_counted(run_id: str, mark: str) -> Any:
        info, events = await read_run_at(run_id, mark)
        read[run_id] += len(events)
        return info, events

    world.list_events = list_counted  # type: ignore[method-assign]
    world.read_run = read_counted  # type: ignore[method-assign]
    world.read_run_at = read_at_counted  # type: ignore[method-assign]


async def test_the_events_read_back_do_not_grow_with_the_log(engine: Engine) -> None:
    read: Counter[str] = Counter()
    _counted(engine.world, read)
    unlimited = settings(history_warn_events=0, history_limit_events=0)
    async with engine.worker([flows.hl_steps], settings=unlimited):
        short = await engine.client.start(flows.hl_steps, 20)
        await short.result(timeout=60)
        long = await engine.client.start(flows.hl_steps, 200)
        await long.result(timeout=120)
    long_log = len(await engine.world.list_events(long.run_id))
    assert long_log > 500  # three events a step: the long log is ten times the short one
    # what was read back besides the final read above is the same for both runs: the log
    # as the first delivery found it, never the log again per step
    assert read[long.run_id] - long_log <= read[short.run_id] + 5


async def test_a_wake_reads_the_log_from_its_first_event_once(engine: Engine) -> None:
    """A wake after a sleep that follows a step rebuilds its replay (the sleep read time
    while the step's completion was provisional): the rebuild reads only the events after
    those the delivery read, not the whole log a second time. The delivery's own read of the
    log (``read_run``) is made before the replay is built; a whole read made while the replay
    is built (``Handler._execute``) is a second one."""
    world = engine.world
    whole: list[int] = []
    list_events = world.list_events

    async def list_counted(run_id: str, after_seq: int = 0) -> Any:
        events = await list_events(run_id, after_seq)
        if not after_seq and any(f.function == "_execute" for f in inspect.stack()):
            whole.append(len(events))
        return events

    async with engine.worker([flows.hl_sleepy]):
        handle = await engine.client.start(flows.hl_sleepy, 10)
        world.list_events = list_counted  # type: ignore[method-assign]
        assert await handle.result(timeout=60) == 10
    assert whole == []
