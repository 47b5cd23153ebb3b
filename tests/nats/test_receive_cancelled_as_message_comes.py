"""A NATS receive cancelled as its message comes, on a real nats-server, leaves the message
for the next receive: the pull that got it must hand it back, not drop it and leave the server
holding it for the whole visibility (ack wait). The cancel lands at the instant the delivery
reached the pull's inbox (before the receive ran again) and at each of a few loop turns later,
so each await of the receive between the pull's answer and its return is tried."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline.worlds.nats import queue as nats_queue

VISIBILITY = 30.0
"""Far longer than the next receive waits: a message the cancelled receive kept is not seen."""


@pytest.mark.parametrize("turns", range(4))
async def test_a_nats_receive_cancelled_as_its_message_comes_leaves_the_message(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, turns: int
) -> None:
    world = await open_nats_world(visibility_seconds=VISIBILITY)
    topic = f"cancelled-receive-{turns}"
    arrived = asyncio.Event()
    receive: asyncio.Future[Any] | None = None
    on_msg = nats_queue._Inbox.on_msg
    loop = asyncio.get_running_loop()

    def cancel_in(left: int) -> None:
        assert receive is not None
        if left:
            loop.call_soon(cancel_in, left - 1)
        else:
            receive.cancel()

    def spied(self: Any, msg: Any) -> None:
        on_msg(self, msg)
        if str(msg.reply or "").startswith("$JS.ACK"):
            arrived.set()  # a delivery reached the pull in progress
            if receive is not None:  # the cancel comes with it, or ``turns`` turns later
                cancel_in(turns)

    monkeypatch.setattr(nats_queue._Inbox, "on_msg", spied)
    # a first message taken and acked: the consumer is known drained, the next receive is one
    # long pull waiting for a message
    await world.enqueue(topic, {"n": -1})
    first = await world.receive(topic, wait_seconds=5.0)
    assert [d.payload["n"] for d in first] == [-1]
    await world.ack(first[0])
    arrived.clear()

    receive = asyncio.ensure_future(world.receive(topic, wait_seconds=20.0))
    for _ in range(5):
        await asyncio.sleep(0.05)  # the receive's pull is asked
    await world.enqueue(topic, {"n": turns})
    await asyncio.wait_for(arrived.wait(), 10.0)
    got_by_cancelled: Any = None
    try:
        got_by_cancelled = await asyncio.wait_for(receive, 10.0)
    except asyncio.CancelledError:
        pass
    if got_by_cancelled is not None:  # it ended before the cancel: the message is its
        assert [d.payload["n"] for d in got_by_cancelled] == [turns]
        await world.ack(got_by_cancelled[0])
        return
    got = await world.receive(topic, wait_seconds=5.0)
    assert [d.payload["n"] for d in got] == [turns], (
        f"a NATS receive cancelled {turns} turns after its message reached the pull kept the "
        f"message: the next receive got {got!r}"
    )
    assert got[0].attempt == 1, "the hand-back of a receive that never handed it out counted"
    await world.ack(got[0])


async def test_a_partitioned_receive_cancelled_at_a_later_partition_hands_back_the_earlier(
    open_nats_world: OpenWorlds,
) -> None:
    """On 3 partitions a receive asks each partition's queue in turn: a message taken from
    one and a cancel that lands while the next is asked must leave the message for the next
    receive, not held by the cancelled one until its ack wait runs out."""
    world = await open_nats_world(visibility_seconds=VISIBILITY, partitions=3)
    topic = "cancelled-partitioned-receive"
    await world.enqueue(topic, {"n": 1})
    queues = list(world._takes)
    asked_after: asyncio.Event = asyncio.Event()
    receives = {id(q): q.receive for q in queues}
    handed: list[Any] = []

    def patched(queue: Any) -> Any:
        async def receive(topic: str, max_messages: int, wait_seconds: float) -> list[Any]:
            if handed:  # a later partition asked after one handed a message out
                asked_after.set()
                await asyncio.sleep(30.0)
            got: list[Any] = await receives[id(queue)](topic, max_messages, wait_seconds)
            handed.extend(got)
            return got

        return receive

    # the partition holding the message is asked first (another is asked after it)
    for at, queue in enumerate(queues):
        found = await queue.receive(topic, 1, 0.0)
        if found:
            await world.release(found[0])
            world._turn = (at - 1) % len(queues)
            break
    else:
        raise AssertionError("no partition holds the message")
    for queue in queues:
        queue.receive = patched(queue)
    receive = asyncio.ensure_future(world.receive(topic, max_messages=2, wait_seconds=5.0))
    await asyncio.wait_for(asked_after.wait(), 10.0)
    receive.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receive
    for queue in queues:
        queue.receive = receives[id(queue)]
    got = await world.receive(topic, wait_seconds=5.0)
    assert [d.payload["n"] for d in got] == [1], (
        f"a partitioned receive cancelled after a partition handed out a message kept it: "
        f"the next receive got {got!r}"
    )
    assert got[0].attempt == 1
    await world.ack(got[0])
