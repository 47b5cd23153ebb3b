"""A renewal the server leaves unanswered (a consumer electing its leader answers nothing for
seconds) is not a refused one: the worker keeps the hold its last renewal proved and asks
again, so the step body under it runs on, once, instead of being cut off and run again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import of_type, settings
from wayline._core.events import EventType
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats.queue import Queue

pytestmark = pytest.mark.slow

BODIES: list[str] = []


@wayline.step
async def outlasts_a_renewal(label: str) -> str:
    BODIES.append(label)
    await asyncio.sleep(3.0)  # past the first renewal of a 6 s visibility (every 2 s)
    return label


@wayline.workflow
async def one_long_step(label: str) -> str:
    return await outlasts_a_renewal(label)


def _first_renewal_unanswered(monkeypatch: Any) -> list[bool]:
    """The first renewal is sent where no one answers (as a consumer without a leader);
    returns the list that records each renewal's outcome (False: raised)."""
    renew = Queue.renew
    outcomes: list[bool] = []

    async def renewing(self: Queue, delivery: Any) -> bool:
        msg = delivery.handle.msg
        reply = msg.reply
        if not outcomes:
            msg.reply = reply + ".lost"
        try:
            renewed = await renew(self, delivery)
        except WorldUnavailableError:
            outcomes.append(False)
            raise
        finally:
            msg.reply = reply
        outcomes.append(renewed)
        return renewed

    monkeypatch.setattr(Queue, "renew", renewing)
    return outcomes


async def test_an_unanswered_renewal_is_unavailable_not_refused(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(request_timeout=1.0)
    await world.enqueue("flow", {"x": 1})
    [d] = await world.receive("flow", wait_seconds=2)
    reply = d.handle.msg.reply
    d.handle.msg.reply = reply + ".lost"
    with pytest.raises(WorldUnavailableError):
        await world.renew(d)
    d.handle.msg.reply = reply
    assert await world.renew(d) is True  # still this holder's
    assert await world.ack(d) is True


async def test_a_step_runs_once_through_an_unanswered_renewal(
    open_nats_world: OpenWorlds, monkeypatch: Any
) -> None:
    world = await open_nats_world(visibility_seconds=6.0, request_timeout=1.0)
    outcomes = _first_renewal_unanswered(monkeypatch)
    async with wayline.Worker(world, [one_long_step], settings=settings()):
        handle = await wayline.Client(world).start(one_long_step, world.names.prefix)
        assert await handle.result(timeout=30) == world.names.prefix
        events = await handle.events()
    assert outcomes[:2] == [False, True]  # unanswered, then renewed
    assert BODIES.count(world.names.prefix) == 1
    assert of_type(events, EventType.STEP_RETRYING) == []
