"""The orphan grace against a start retried with the same input: the retry puts the same blob
again, and that put renews the blob's time, so a cleanup between the retry's put and its
append keeps the blob (the run is live a moment later). A grace that is not a positive number
of seconds is refused, naming the option, by every world."""

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
