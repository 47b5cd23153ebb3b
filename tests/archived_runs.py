"""A long archived run for the tests of archived pages (tests/contract/test_retention.py,
tests/console/test_archived_event_pages.py)."""

from __future__ import annotations

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.world import World


async def long_archived_run(world: World, steps: int, workflow: str) -> str:
    """A completed run of ``steps + 3`` events (created, started, a ``step_created`` per
    step named ``<workflow>-<i>`` in appends of 100, completed), archived: the only run
    that ends in ``world``, so the archive pass takes it alone."""
    run_id = new_run_id()
    await world.append(
        run_id,
        [
            NewEvent(T.RUN_CREATED, data={"workflow": workflow, "input": None}),
            NewEvent(T.RUN_STARTED),
        ],
    )
    for start in range(0, steps, 100):
        batch = range(start, min(steps, start + 100))
        await world.append(
            run_id, [NewEvent(T.STEP_CREATED, f"{workflow}-{i}", {"name": "s"}) for i in batch]
        )
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    assert await world.archive_runs(older_than=0) == 1
    return run_id
