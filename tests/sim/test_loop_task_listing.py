"""The virtual loop lists its own tasks (``VirtualLoop.tasks``) instead of walking every task
of the process as ``asyncio.all_tasks`` does: the end of a seed cancels what that list gives,
so it must hold every task asyncio knows of on the loop, the engine's eager tasks too."""

from __future__ import annotations

import asyncio
import random

from wayline._engine import eager
from wayline.sim.determinism import patched
from wayline.sim.loop import VirtualLoop


def test_the_loop_lists_every_task_asyncio_lists_for_it() -> None:
    loop = VirtualLoop(random.Random(7))
    seen: dict[str, set[asyncio.Task[object]]] = {}

    async def sleeper(seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def main() -> None:
        made = [loop.create_task(sleeper(60.0), name=f"listing-made-{i}") for i in range(3)]
        eagers = [eager.start(sleeper(30.0), name=f"listing-eager-{i}") for i in range(2)]
        ended = eager.start(sleeper(0.0), name="listing-eager-ended")
        await asyncio.sleep(1.0)
        own = {t for t in loop.tasks() if not t.done()}
        seen["loop"], seen["asyncio"] = own, asyncio.all_tasks(loop)
        seen["eager"] = set(eagers)
        for task in [*made, *eagers, ended]:
            task.cancel()
        await asyncio.gather(*made, *eagers, ended, return_exceptions=True)

    try:
        with patched(loop, random.Random(8), lambda _process: None):
            loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen["loop"] == seen["asyncio"]
    assert seen["eager"] <= seen["loop"]
    # the listing holds only this loop's tasks: another loop's eager tasks are not adopted
    assert all(t.get_loop() is loop for t in loop.tasks())
