"""The ``engine_logic`` mark (``tests/conftest.py``): a marked test's ``make_world`` opens the
local and the memory world, not the NATS world, and an unmarked test keeps every real world."""

from __future__ import annotations

import pytest

from tests.conftest import WORLD_KINDS, WorldFactory
from wayline.worlds.local import LocalWorld
from wayline.worlds.memory import MemoryWorld


@pytest.mark.engine_logic
async def test_a_marked_test_opens_the_local_and_the_memory_world(
    make_world: WorldFactory,
) -> None:
    world = await make_world()
    assert isinstance(world, LocalWorld | MemoryWorld), type(world)


async def test_an_unmarked_test_opens_every_real_world(
    make_world: WorldFactory, request: pytest.FixtureRequest
) -> None:
    world = await make_world()
    assert not isinstance(world, MemoryWorld)
    assert request.node.callspec.params["make_world"] in WORLD_KINDS
