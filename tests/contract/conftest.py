"""The contract suite: one file per port of the seam (``wayline.world.ports``: event log,
change feed, work queue, slots, streams, registry, retention, hook payloads, lifecycle and
clock), each run on every world. It runs on a third world besides the two that ship: the
in-memory world the simulator drives (``wayline.worlds.memory``). Passing the same tests is
what makes the simulator's findings about the engine hold for the real worlds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WORLD_KINDS, WorldFactory, open_world_of_kind
from wayline.world import World


@pytest.fixture(params=[*WORLD_KINDS, "memory"])
async def make_world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorldFactory]:
    opened: list[World] = []
    store: Any = None

    async def factory(**options: Any) -> World:
        nonlocal store
        if request.param != "memory":
            world = await open_world_of_kind(request, tmp_path, request.param, options)
        else:
            from wayline.worlds.memory import MemoryStore, MemoryWorld

            store = store or MemoryStore()
            world = MemoryWorld(store, **options)
            await world.start()
        opened.append(world)
        return world

    yield factory
    for world in reversed(opened):
        await world.close()
