"""A worker's wall clock that steps (NTP stepping it, an operator setting it) after the world
has learnt the server's clock: ``World.now`` keeps reading the server's time at once, instead
of the stepped clock until a window of appends has gone by (``worlds/nats/skew.py``). The
server is real and runs on this host, so its clock is this host's unstepped one. The embedded
world has no such reading: its clock is the process's own, so a step moves its time too."""

from __future__ import annotations

import time

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core import clock
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id

STEP = 90.0


@pytest.mark.parametrize("step", [STEP, -STEP])
async def test_a_stepped_wall_clock_does_not_move_the_worlds_time(
    open_nats_world: OpenWorlds, step: float
) -> None:
    world = await open_nats_world()
    run_id = new_run_id()
    created = NewEvent(EventType.RUN_CREATED, data={"workflow": "stepped_clock.flow"})
    await world.append(run_id, [created], expected_seq=0)
    assert abs(world.now() - time.time()) < 1.0
    clock.use(lambda: time.time() + step)
    try:
        # Before the next append, as when a worker decides from what it last read.
        assert abs(world.now() - time.time()) < 1.0, "the step moved the world's time"
    finally:
        clock.use(None)
