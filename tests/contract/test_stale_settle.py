"""World contract: a delivery is settled only by its own holder. A's late ack, renew or retry,
after the message was redelivered to B, is a no-op (the world answers False), and B's delivery
is untouched: it can still be renewed and acked, and without that ack it comes back."""

from __future__ import annotations

import asyncio

import pytest

from wayline.world import Delivery, World


async def _superseded(make_world) -> tuple[World, World, Delivery, Delivery]:  # type: ignore[no-untyped-def]
    a_world = await make_world(visibility_seconds=1)
    b_world = await make_world(visibility_seconds=1)
    mid = await a_world.enqueue("flow", {"runId": "r1"})
    [a] = await a_world.receive("flow", wait_seconds=2)
    # A misses its renewals; B receives the redelivery (attempt 2)
    [b] = await b_world.receive("flow", wait_seconds=5)
    assert (b.message_id, b.attempt, a.attempt) == (mid, 2, 1)
    return a_world, b_world, a, b


@pytest.mark.parametrize("stale", ["ack", "retry", "renew", "dead_letter"])
async def test_a_stale_settlement_leaves_the_redelivery_alone(make_world, stale: str) -> None:  # type: ignore[no-untyped-def]
    a_world, b_world, a, b = await _superseded(make_world)
    if stale == "ack":
        assert await a_world.ack(a) is False
    elif stale == "retry":
        assert await a_world.retry(a, 0) is False
    elif stale == "renew":
        assert await a_world.renew(a) is False
    else:
        assert await a_world.dead_letter(a, "late") is False
        assert await a_world.list_dead_letters() == []
    # B still holds the message: nobody else receives it while B renews it...
    for _ in range(3):
        await asyncio.sleep(0.4)
        assert await b_world.renew(b) is True
        assert await a_world.receive("flow", wait_seconds=0) == []
    # ...and when B dies without acking, it comes back (the run's wake is not lost)
    [c] = await a_world.receive("flow", wait_seconds=5)
    assert (c.message_id, c.attempt) == (b.message_id, 3)
    assert await b_world.ack(b) is False  # B's ack is now stale in turn
    assert await a_world.ack(c) is True
    assert await a_world.receive("flow", wait_seconds=0.3) == []
    assert await a_world.runs_with_messages() in (set(), None)


async def test_the_current_holder_settles(world: World) -> None:
    await world.enqueue("flow", {"runId": "r2"})
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.renew(d) is True
    assert await world.retry(d, 0) is True
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.ack(d) is True
    assert await world.ack(d) is False  # twice: the second is a no-op
