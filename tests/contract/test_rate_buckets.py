"""World contract: the token buckets of ``wayline.RateLimit``. A bucket is one per key for the
whole world: every world opened on it (a worker each) takes from the same tokens, and of
takers racing for the last token exactly one gets it."""

from __future__ import annotations

import asyncio

from tests.conftest import WorldFactory
from wayline.world import World

_HOUR = 1 / 3600


async def test_a_bucket_starts_full_and_keys_are_apart(world: World) -> None:
    assert [await world.take_token("a", _HOUR, 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = await world.take_token("a", _HOUR, 3)
    assert 3000 < wait <= 3600  # a token a hour: the next is nearly an hour away
    assert await world.take_token("b", _HOUR, 3) == 0.0  # another key: its own bucket


async def test_tokens_refill(world: World) -> None:
    assert await world.take_token("r", 20.0, 1) == 0.0
    for _ in range(20):  # bounded: each wait is at most a twentieth of a second
        wait = await world.take_token("r", 20.0, 1)
        if wait == 0.0:
            return
        assert 0 < wait <= 0.05
        await asyncio.sleep(wait)
    raise AssertionError("no token came back in 20 waits of the time it was due")


async def test_a_waiter_takes_the_token_reserved_for_it(make_world: WorldFactory) -> None:
    """Kept by the world, shared: a waiter told to come back at its token's time finds it
    kept for it, even when another worker's taker asked in between."""
    one, two = await make_world(), await make_world()
    assert await one.take_token("q", 4.0, 1, "a") == 0.0
    wait = await one.take_token("q", 4.0, 1, "b")
    assert 0 < wait <= 0.25
    assert await two.take_token("q", 4.0, 1, "c") > wait  # c queues behind b
    await asyncio.sleep(wait + 0.01)
    assert await two.take_token("q", 4.0, 1, "b") == 0.0


async def test_a_reservation_taken_late_counts_against_the_burst(
    make_world: WorldFactory,
) -> None:
    """A waiter that comes back well after its token fell due, to a bucket refilled to its
    burst meanwhile, takes its reserved token; the bucket holds no more than the burst, so
    the next taker waits (before, it took a second token at once: burst + 1 in an instant)."""
    one, two = await make_world(), await make_world()
    assert await one.take_token("late", 1.0, 1, "a") == 0.0
    wait = await one.take_token("late", 1.0, 1, "b")
    assert 0 < wait <= 1.0
    await asyncio.sleep(wait + 2.1)  # b's token is due, and the bucket has refilled past 1
    assert await two.take_token("late", 1.0, 1, "b") == 0.0
    assert await two.take_token("late", 1.0, 1, "c") > 0.0


async def test_worlds_on_one_store_share_a_bucket(make_world: WorldFactory) -> None:
    """Takers on two worlds of one store race for 5 tokens: exactly 5 win (compare-and-set
    on NATS, a transaction on SQLite), and the losers learn when the next is due."""
    one, two = await make_world(), await make_world()
    takes = [w.take_token("shared", _HOUR, 5) for w in (one, two) for _ in range(10)]
    waits = await asyncio.gather(*takes)
    assert sorted(waits)[:5] == [0.0] * 5
    assert all(w > 0 for w in sorted(waits)[5:])
