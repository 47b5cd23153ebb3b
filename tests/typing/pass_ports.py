"""Every world is each of its ports: one can be passed wherever a port is asked for."""

from __future__ import annotations

from wayline.world import World
from wayline.world.ports import EventLog, Retention, Slots, Streams, WorkQueue


def narrow(world: World) -> tuple[EventLog, WorkQueue, Slots, Streams, Retention]:
    return world, world, world, world, world
