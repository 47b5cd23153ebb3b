"""World contract: leased concurrency slots and the takes that hold them. A step's holder is
named ``run:stepId``, the same for every attempt, so a redelivery takes the holder again at
once; each take's token keeps the attempt it replaced from renewing or giving back the slot
the redelivery now holds."""

from __future__ import annotations

from wayline._core.concurrency import Limit
from wayline._engine import step_slots
from wayline.world import World


async def test_a_stale_take_neither_renews_nor_gives_back_its_redeliverys_slot(
    world: World,
) -> None:
    holder = "run1:s1"
    assert (await world.acquire_slot("k", holder, 1, lease=30, token="a"))[0]  # attempt 1
    assert (await world.acquire_slot("k", holder, 1, lease=30, token="b"))[0]  # redelivery
    assert not await world.renew_slot("k", holder, lease=30, token="a")  # attempt 1 is cut off
    await world.release_slot("k", holder, token="a")  # ... and its give-back is a no-op
    assert await world.acquire_slot("k", "run2:s1", 1, lease=30, token="c") == (False, [holder])
    assert await world.renew_slot("k", holder, lease=30, token="b")  # the redelivery holds on
    await world.release_slot("k", holder, token="b")
    assert await world.acquire_slot("k", "run2:s1", 1, lease=30, token="c") == (True, ["run2:s1"])


async def test_a_slot_taken_without_a_token_answers_to_any(world: World) -> None:
    """A holder written without a token (by a worker from before tokens) is renewed and
    given back under any, as it was; so is one renewed or given back without a token."""
    assert (await world.acquire_slot("k", "old", 1, lease=30))[0]
    assert await world.renew_slot("k", "old", lease=30, token="new")
    await world.release_slot("k", "old", token="new")
    assert (await world.acquire_slot("k", "new", 1, lease=30, token="t"))[0]
    assert await world.renew_slot("k", "new", lease=30)
    await world.release_slot("k", "new")
    assert await world.acquire_slot("k", "next", 1, lease=30) == (True, ["next"])


async def test_a_stale_attempt_cut_off_leaves_the_redelivery_its_slot(world: World) -> None:
    """Attempt 1 of a step stalls, the delivery goes to another worker whose attempt 2 takes
    the step's slot again, then attempt 1's body is cut off and its ``Slot.held`` gives back:
    a ``max=1`` slot must stay the running attempt 2's, not go to another run's step."""
    limit = Limit(max=1, lease=30)
    first = await step_slots.acquire(world, "k", "run1:s1", limit)
    second = await step_slots.acquire(world, "k", "run1:s1", limit)
    assert isinstance(first, step_slots.Slot) and isinstance(second, step_slots.Slot)
    async with second.held():  # attempt 2's body runs
        async with first.held():
            pass  # attempt 1 is cut off: its ``finally`` gives back
        other = await step_slots.acquire(world, "k", "run2:s1", limit)
        assert isinstance(other, step_slots.Wait), "max=1 slot taken while attempt 2 runs"
        assert other.holders == ["run1:s1"]
    assert isinstance(await step_slots.acquire(world, "k", "run2:s1", limit), step_slots.Slot)
