"""Engines on the worlds that order ready work (``wayline._core.ordering``): by priority with
aging and by fairness key on every world (the NATS world takes turns between a level's lanes,
each holding the keys its hash picks: docs/sdk.md, "Priority and fairness")."""

from __future__ import annotations

from typing import Any

import pytest

import wayline
from tests.conftest import WorldFactory
from tests.runtime.harness import Engine
from wayline.world import FLOW_TOPIC, Delivery, World


@pytest.fixture
async def ordered_engine(make_ordered_world: WorldFactory) -> Engine:
    """An engine on a world that orders ready work (``make_ordered_world``)."""
    world = await make_ordered_world()
    return Engine(world=world, make_world=make_ordered_world, client=wayline.Client(world))


@pytest.fixture
async def prioritised_engine(make_prioritised_world: WorldFactory) -> Engine:
    """An engine on a world that serves ready work by priority (``make_prioritised_world``)."""
    world = await make_prioritised_world()
    return Engine(world=world, make_world=make_prioritised_world, client=wayline.Client(world))


def record_starts(world: World) -> list[str]:
    """The runs in the order ``world`` hands out their first flow delivery (their start), as
    the worker receives them from the real queue: the list fills while the worker runs."""
    started: list[str] = []
    receive = world.receive

    async def receiving(topic: str, **kwargs: Any) -> list[Delivery]:
        got = await receive(topic, **kwargs)
        for delivery in got:
            run_id = (delivery.payload or {}).get("runId")
            if delivery.topic == FLOW_TOPIC and run_id and run_id not in started:
                started.append(str(run_id))
        return got

    world.receive = receiving  # type: ignore[method-assign]
    return started
