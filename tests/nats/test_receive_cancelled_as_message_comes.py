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
