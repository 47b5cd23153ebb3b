"""The crash window of an out-of-line payload: its blob is stored before the append that names
it, so a start whose process dies in between (or whose append is refused) leaves a blob of a
run id that has no run. Cleanup deletes such a blob once it is older than the world's grace
for orphans, never sooner (it may be a start in flight), and never a live run's; a start
retried with the same input renews its blob's time, so a cleanup between the retry's put and
its append keeps it. A grace that is not a positive number of seconds is refused, naming the
option, by every world."""

from __future__ import annotations

import asyncio

import pytest

from tests.blobs.stores import blobs_of, stored
from tests.conftest import WorldFactory
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import ConfigurationError
from wayline.worlds.memory import MemoryWorld

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


async def test_a_retried_start_after_the_grace_keeps_its_input_blob(
    make_world: WorldFactory,
) -> None:
    world = await make_world(orphan_grace_seconds=GRACE)
    big = "o" * (400 * 1024)  # over the default inline threshold (256 KiB)
    run_id = new_run_id()
    created = [NewEvent(T.RUN_CREATED, data={"workflow": "orphan-grace", "input": big})]
    # the first attempt stores the blob, and its process dies before the append
    await blobs_of(world).stow(run_id, created)
    await asyncio.sleep(GRACE + 0.2)
    # the retry (same run id, same input) puts the same blob again
    stowed = await blobs_of(world).stow(run_id, created)
    # a cleanup pass lands between the retry's put and its append
    await world.delete_runs(older_than=0)
    await world.append(run_id, list(stowed))
    assert await stored(world, run_id, big), "the live run's input blob was deleted"


@pytest.mark.parametrize("grace", [0, -1.0, float("nan")])
async def test_a_grace_that_is_not_a_positive_number_of_seconds_is_refused(
    make_world: WorldFactory, grace: float
) -> None:
    with pytest.raises(ConfigurationError, match="orphan_grace_seconds"):
        await make_world(orphan_grace_seconds=grace)


def test_the_memory_world_refuses_a_grace_of_zero_too() -> None:
    with pytest.raises(ConfigurationError, match="orphan_grace_seconds"):
        MemoryWorld(orphan_grace_seconds=0)
