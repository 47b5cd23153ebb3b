"""The order in which a world hands out ready work (``wayline._core.ordering``): priority
first, aging so that no priority starves, and fair turns between fairness keys.

Held to every world. The NATS world takes turns between a level's lanes rather than its keys
(a key's lane is a hash of it, ``FAIR_LANES`` a level): the keys these tests use are in lanes
of their own there, as ``test_the_keys_here_are_in_lanes_of_their_own`` checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import WorldFactory
from wayline._core import ordering
from wayline.world import Delivery, World
from wayline.world.sending import send


@pytest.fixture
def open_ordered(make_ordered_world: WorldFactory) -> WorldFactory:
    return make_ordered_world


@pytest.fixture
def open_prioritised(make_prioritised_world: WorldFactory) -> WorldFactory:
    return make_prioritised_world


def message(name: str, order: ordering.Ordering = ordering.DEFAULT) -> dict[str, Any]:
    return {"name": name, **order.fields()}


async def take(world: World, count: int) -> list[Delivery]:
    """``count`` deliveries received one at a time (one free slot), each acked."""
    got: list[Delivery] = []
    for _ in range(count):
        [delivery] = await world.receive("flow", wait_seconds=2)
        await world.ack(delivery)
        got.append(delivery)
    return got


def names(deliveries: list[Delivery]) -> list[str]:
    return [str((d.payload or {})["name"]) for d in deliveries]


async def test_higher_priority_sent_later_is_received_first(open_prioritised: Any) -> None:
    world = await open_prioritised()
    for i in range(3):
        await world.enqueue("flow", message(f"low{i}", ordering.Ordering(priority=7)))
    await world.enqueue("flow", message("default"))
    await world.enqueue("flow", message("urgent", ordering.Ordering(priority=0)))
    got = names(await take(world, 5))
    assert got == ["urgent", "default", "low0", "low1", "low2"]


async def test_a_batch_is_handed_out_in_the_same_order(open_prioritised: Any) -> None:
    world = await open_prioritised()
    for i in range(3):
        await world.enqueue("flow", message(f"low{i}", ordering.Ordering(priority=7)))
    await world.enqueue("flow", message("urgent", ordering.Ordering(priority=0)))
    got = await world.receive("flow", max_messages=10, wait_seconds=2)
    assert names(got) == ["urgent", "low0", "low1", "low2"]
    for delivery in got:
        await world.ack(delivery)


async def test_work_that_waited_long_enough_goes_before_newer_urgent_work(
    open_prioritised: Any,
) -> None:
    """Aging: a priority-9 message that waited nine aging periods is at level 0, and it was
    sent first, so it goes before priority-0 work sent after it."""
    world = await open_prioritised(aging_seconds=0.05)
    await world.enqueue("flow", message("patient", ordering.Ordering(priority=9)))
    await asyncio.sleep(0.05 * 9 + 0.3)
    for i in range(3):
        await world.enqueue("flow", message(f"urgent{i}", ordering.Ordering(priority=0)))
    assert names(await take(world, 4)) == ["patient", "urgent0", "urgent1", "urgent2"]


async def test_a_backlog_older_than_the_aging_period_still_takes_turns(
    open_ordered: Any,
) -> None:
    """Aging lifts levels, never messages within one: a key's backlog that waited longer
    than the aging period does not go before a newer key's work of the same priority."""
    world = await open_ordered(aging_seconds=0.05)
    for i in range(20):
        await world.enqueue("flow", message(f"a{i}", ordering.Ordering(fairness_key="a")))
    await asyncio.sleep(0.3)
    for i in range(3):
        await world.enqueue("flow", message(f"b{i}", ordering.Ordering(fairness_key="b")))
    got = names(await take(world, 6))
    assert sorted(n for n in got if n.startswith("b")) == ["b0", "b1", "b2"], got


async def test_without_waiting_low_priority_work_stays_behind(open_prioritised: Any) -> None:
    world = await open_prioritised()  # aging of a minute: nothing here waits that long
    await world.enqueue("flow", message("patient", ordering.Ordering(priority=9)))
    await asyncio.sleep(0.3)
    for i in range(3):
        await world.enqueue("flow", message(f"urgent{i}", ordering.Ordering(priority=0)))
    assert names(await take(world, 4)) == ["urgent0", "urgent1", "urgent2", "patient"]


async def test_fairness_keys_take_turns_whatever_the_backlog(open_ordered: Any) -> None:
    world = await open_ordered()
    for i in range(40):
        await world.enqueue("flow", message(f"a{i}", ordering.Ordering(fairness_key="a")))
    for i in range(3):
        await world.enqueue("flow", message(f"b{i}", ordering.Ordering(fairness_key="b")))
    got = names(await take(world, 6))
    assert sorted(n for n in got if n.startswith("b")) == ["b0", "b1", "b2"]
    assert [n for n in got if n.startswith("a")] == ["a0", "a1", "a2"]  # each key in order


async def test_a_key_of_weight_three_takes_three_turns_per_round(open_ordered: Any) -> None:
    world = await open_ordered()
    heavy = ordering.Ordering(fairness_key="heavy", fairness_weight=3)
    for i in range(30):
        await world.enqueue("flow", message(f"h{i}", heavy))
        await world.enqueue("flow", message(f"l{i}", ordering.Ordering(fairness_key="light")))
    got = names(await take(world, 12))
    assert sum(n.startswith("h") for n in got) == 9
    assert sum(n.startswith("l") for n in got) == 3


async def test_a_key_that_was_idle_gets_no_credit_for_it(open_ordered: Any) -> None:
    """Start-time fair queuing: a key sending after the others were served for a while starts
    at the topic's clock, so it shares from then on and does not take every slot to catch up."""
    world = await open_ordered()
    for i in range(20):
        await world.enqueue("flow", message(f"a{i}", ordering.Ordering(fairness_key="a")))
    await take(world, 10)
    for i in range(10):
        await world.enqueue("flow", message(f"b{i}", ordering.Ordering(fairness_key="b")))
    got = names(await take(world, 6))
    assert sum(n.startswith("a") for n in got) == 3


async def test_priority_goes_before_fairness(open_prioritised: Any) -> None:
    world = await open_prioritised()
    for i in range(3):
        await world.enqueue("flow", message(f"a{i}", ordering.Ordering(fairness_key="a")))
    urgent = ordering.Ordering(priority=1, fairness_key="b")
    await world.enqueue("flow", message("b-urgent", urgent))
    assert names(await take(world, 2)) == ["b-urgent", "a0"]


async def test_a_handed_back_message_keeps_its_place(open_prioritised: Any) -> None:
    world = await open_prioritised()
    await world.enqueue("flow", message("urgent", ordering.Ordering(priority=0)))
    await world.enqueue("flow", message("later"))
    [first] = await world.receive("flow", wait_seconds=2)
    assert names([first]) == ["urgent"]
    await world.release(first)
    assert names(await take(world, 2)) == ["urgent", "later"]


async def test_a_message_carries_its_ordering_and_the_default_carries_none(
    open_prioritised: Any,
) -> None:
    world = await open_prioritised()
    order = ordering.Ordering(priority=2, fairness_key="acme", fairness_weight=3)
    await send(world, "flow", {"runId": "r1"})
    with ordering.attached(order):  # the sender puts the ordering on, not the world
        await send(world, "flow", {"runId": "r2"})
    first, second = await take(world, 2)
    assert second.payload == {"runId": "r1"}
    assert first.payload == {
        "runId": "r2",
        "_priority": 2,
        "_fairnessKey": "acme",
        "_fairnessWeight": 3,
    }
    assert ordering.of_payload(first.payload) == order


def test_the_keys_here_are_in_lanes_of_their_own() -> None:
    from wayline.worlds.nats.names import lane_of

    for pair in (("a", "b"), ("heavy", "light")):
        assert len({lane_of(key) for key in pair}) == 2, pair
