"""World contract: ``cancel_delayed`` withdraws a delayed message its process enqueued before
it is first delivered (a short sleep's wake, once the worker woke the sleep itself and wrote
so: ``_engine.prompt_wakes``), and changes nothing for a message delivered already."""

from __future__ import annotations

from tests.contract.test_in_flight_messages import _receive
from wayline._core.ids import MessageId
from wayline.world import World


async def test_a_cancelled_delayed_message_is_never_delivered_and_frees_its_key(
    world: World,
) -> None:
    topic = "flow:w:cancel-delayed@a"
    now = world.now()
    soon = await world.enqueue(topic, {"soon": True}, idempotency_key="cd-soon", delay_seconds=0.3)
    late = await world.enqueue(topic, {"late": True}, idempotency_key="cd-late", delay_seconds=300)
    kept = await world.enqueue(topic, {"kept": True}, delay_seconds=0.3)
    assert await world.cancel_delayed(soon)
    assert await world.cancel_delayed(late)
    assert not await world.cancel_delayed(late)  # a second cancel finds nothing
    assert await world.delayed_messages([topic], now + 600) == {topic: 1}
    # Past the moment the cancelled message was due (on NATS, past the scheduler's 250 ms
    # floor as well), only the message left armed is delivered.
    got = await _receive(world, topic, 1)
    assert [d.payload for d in got] == [{"kept": True}]
    assert got[0].message_id == kept
    assert await world.receive(topic, max_messages=5, wait_seconds=0.8) == []
    assert await world.ack(got[0])
    # the key is free again: the same key stores a new message
    again = await world.enqueue(topic, {"again": True}, idempotency_key="cd-soon")
    assert again != soon
    got = await _receive(world, topic, 1)
    assert [d.payload for d in got] == [{"again": True}]
    assert await world.ack(got[0])


async def test_a_delivered_message_is_not_cancelled(world: World) -> None:
    topic = "flow:w:cancel-delivered@a"
    mid = await world.enqueue(topic, {"n": 1}, idempotency_key="cd-delivered", delay_seconds=0.05)
    held = await _receive(world, topic, 1)
    assert held[0].message_id == mid
    assert not await world.cancel_delayed(mid)  # its holder settles it
    assert await world.release(held[0])  # handed back: delivered already, not cancelled
    assert not await world.cancel_delayed(mid)
    held = await _receive(world, topic, 1)
    assert held[0].message_id == mid
    assert await world.ack(held[0])
    assert not await world.cancel_delayed(mid)  # acked: gone


async def test_an_unknown_id_cancels_nothing(world: World) -> None:
    topic = "flow:w:cancel-unknown@a"
    await world.enqueue(topic, {"n": 1}, delay_seconds=300)
    assert not await world.cancel_delayed(MessageId("not-a-message"))
    assert not await world.cancel_delayed(MessageId("987654321"))
    assert await world.delayed_messages([topic], world.now() + 600) == {topic: 1}
