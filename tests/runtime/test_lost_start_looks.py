"""The running worker's look for lost starts (``_engine.lost_starts``) beside an idle world:
it lists the pending runs again only when a run was created or changed status since its last
look (``World.runs_mark``), as on NATS that list reads the last entry of every run."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline
from tests.conftest import WorldFactory
from wayline._core.events import RunStatus
from wayline.settings import Settings


@wayline.workflow(name="lost_start_looks_nap")
async def nap() -> None:
    await wayline.sleep(3600)


async def test_an_idle_worker_lists_the_pending_runs_only_after_a_change(
    make_world: WorldFactory,
) -> None:
    world = await make_world()
    client = wayline.Client(world)
    settings = Settings.from_env({"WAYLINE_START_REARM_SECONDS": "0.1"})
    looks: list[Any] = []
    list_runs = world.list_runs

    async def counted(**kwargs: Any) -> Any:
        if kwargs.get("status") == RunStatus.PENDING:
            looks.append(kwargs)
        return await list_runs(**kwargs)

    world.list_runs = counted  # type: ignore[method-assign]
    async with wayline.Worker(world, [nap], settings=settings):
        handle = await client.start(nap)
        for _ in range(600):  # bounded: the run is asleep within a minute
            info = await world.get_run(handle.run_id)
            if info is not None and info.status == RunStatus.RUNNING and looks:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the looks that follow the start and the run's first wake
        looks.clear()
        await asyncio.sleep(2.0)  # idle: sixteen looks at most, at one every 0.1-0.125 s
    # The sleeping run changes nothing, so no look lists the runs again (one may still follow
    # the run's last change, on a loaded machine).
    assert len(looks) <= 1, len(looks)
