"""The contract suite: one file per port of the seam (``wayline.world.ports``: event log,
change feed, work queue, slots, streams, registry, retention, blobs, hook payloads, lifecycle and
clock), each run on every world. It runs on a third world besides the two that ship: the
in-memory world the simulator drives (``wayline.worlds.memory``). Passing the same tests is
what makes the simulator's findings about the engine hold for the real worlds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import PARTITIONED_WORLD_KINDS, WorldFactory, world_factory


@pytest.fixture(params=[*PARTITIONED_WORLD_KINDS, "memory"])
async def make_world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorldFactory]:
    async for factory in world_factory(request, tmp_path):
        yield factory
