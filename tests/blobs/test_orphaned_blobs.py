"""The crash window of an out-of-line payload: its blob is stored before the append that names
it, so a start whose process dies in between (or whose append is refused) leaves a blob of a
run id that has no run. Cleanup deletes such a blob once it is older than the world's grace
for orphans, never sooner (it may be a start in flight), and never a live run's. Both worlds."""

from __future__ import annotations

import asyncio

from tests.blobs.stores import blobs_of, stored
from tests.conftest import WorldFactory
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id

GRACE = 0.5
"""The orphan grace of the test's world, in seconds (an hour by default)."""


async def test_cleanup_deletes_the_blob_of_a_start_that_never_appended(
    make_world: WorldFactory,
) -> None:
    world = await make_world(orphan_grace_seconds=GRACE)
    big = "o" * (400 * 1024)  # over the default inline threshold (256 KiB)
    crashed, live = new_run_id(), new_run_id()
    # the start's first half: its input is stored, and its process dies before the append
    await blobs_of(world).stow(crashed, [NewEvent(T.RUN_CREATED, data={"input": big})])
    assert await stored(world, crashed, big)
    # a live run whose input is just as old keeps it
    await world.append(live, [NewEvent(T.RUN_CREATED, data={"workflow": "orphans", "input": big})])

    assert await world.delete_runs(older_than=0) == 0
    assert await stored(world, crashed, big)  # younger than the grace: maybe a start in flight

    await asyncio.sleep(GRACE + 0.2)
    assert await world.delete_runs(older_than=0) == 0  # deletes no run, only the orphan
    assert not await stored(world, crashed, big)
    assert await stored(world, live, big)
    assert (await world.get_run(live)).input == big  # type: ignore[union-attr]
