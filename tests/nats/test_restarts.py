"""What must survive a nats-server restart (SIGTERM) or crash (SIGKILL)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tests.nats_fixtures import NatsServer, OpenWorlds, queue_emptied, wait_reconnected
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldUnavailableError
from wayline.world.terminal_hints import TerminalHints

R = TypeVar("R")

pytestmark = pytest.mark.slow


async def eventually(call: Callable[[], Awaitable[R]], timeout: float = 15.0) -> R:
    """``call()`` once the world has reconnected (WorldUnavailableError meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except WorldUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def receive_one(world: Any, topic: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await eventually(lambda: world.receive(topic, wait_seconds=1))
        if got:
            assert len(got) == 1
            return got[0]
    raise AssertionError(f"nothing arrived on {topic} within {timeout}s")


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
async def test_idempotency_key_survives_a_restart_and_is_released_by_ack(
    nats_server_own: NatsServer, open_own_world: OpenWorlds, kill: bool
) -> None:
    world = await open_own_world(visibility_seconds=3.0)
    first = await world.enqueue("flow", {"v": 1}, idempotency_key="k1")
    nats_server_own.restart(kill=kill)
    await wait_reconnected(*open_own_world.opened)
    # stored across the restart: still deduped (Nats-Msg-Id alone would have forgotten it
    # only once removed, but a fresh process must agree too)
    assert await eventually(lambda: world.enqueue("flow", {"v": 2}, idempotency_key="k1")) == first
    other = await open_own_world()
    assert await other.enqueue("flow", {"v": 3}, idempotency_key="k1") == first
    d = await receive_one(world, "flow")
    assert (d.message_id, d.payload) == (first, {"v": 1})
    # in flight across a second restart: still deduped
    nats_server_own.restart(kill=kill)
    await wait_reconnected(*open_own_world.opened)
    assert await eventually(lambda: other.enqueue("flow", {"v": 4}, idempotency_key="k1")) == first
    if not await eventually(lambda: world.ack(d)):
        # A restarted server can come back without the delivery, and a lost connection ends
        # every hold: the ack is refused, and never turned into a delete (that would remove the
        # message for whoever holds it next). The message stays stored, its key held, until
        # its redelivery is acked.
        assert await other.enqueue("flow", {"v": 4}, idempotency_key="k1") == first
        d = await receive_one(world, "flow", timeout=30)
        assert (d.message_id, d.payload) == (first, {"v": 1})
        assert await eventually(lambda: world.ack(d))
    await queue_emptied(world)  # the server read the ack (sent without waiting for a reply)
    # acked: released, and the release itself survives a restart
    nats_server_own.restart(kill=kill)
    await wait_reconnected(*open_own_world.opened)
    again = await eventually(lambda: other.enqueue("flow", {"v": 5}, idempotency_key="k1"))
    assert again != first
    d = await receive_one(other, "flow")
    assert (d.message_id, d.payload, d.attempt) == (again, {"v": 5}, 1)
    await other.ack(d)
    assert await other.receive("flow", wait_seconds=0.3) == []


async def test_acked_key_is_not_swallowed_after_restart(
    nats_server_own: NatsServer, open_own_world: OpenWorlds
) -> None:
    """Window dedupe would swallow a re-enqueue after ack within its window; keys must not."""
    world = await open_own_world()
    for i in range(3):
        mid = await world.enqueue("step", {"i": i}, idempotency_key="same")
        d = await receive_one(world, "step")
        assert (d.message_id, d.payload) == (mid, {"i": i})
        await world.ack(d)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
async def test_a_delay_armed_before_a_restart_fires_after_it(
    nats_server_own: NatsServer, open_own_world: OpenWorlds, kill: bool
) -> None:
    world = await open_own_world()
    armed = time.monotonic()
    mid = await world.enqueue("flow", {"late": True}, idempotency_key="d1", delay_seconds=2.0)
    # the key is held while the schedule is pending
    assert await world.enqueue("flow", {"x": 0}, idempotency_key="d1", delay_seconds=2.0) == mid
    nats_server_own.restart(kill=kill)
    await wait_reconnected(*open_own_world.opened)
    assert await eventually(lambda: world.enqueue("flow", {"x": 1}, idempotency_key="d1")) == mid
    d = await receive_one(world, "flow")
    assert time.monotonic() - armed >= 1.9
    assert (d.message_id, d.payload, d.attempt) == (mid, {"late": True}, 1)
    # fired and in flight: still held; acked: released
    assert await world.enqueue("flow", {"x": 2}, idempotency_key="d1") == mid
    await world.ack(d)
    fresh = await world.enqueue("flow", {"x": 3}, idempotency_key="d1")
    assert fresh != mid
    d = await receive_one(world, "flow")
    assert d.payload == {"x": 3}
    await world.ack(d)


async def test_event_log_continues_across_a_crash(
    nats_server_own: NatsServer, open_own_world: OpenWorlds
) -> None:
    world = await open_own_world()
    run_id = new_run_id()
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w"})], expected_seq=0)
    await world.append(run_id, [NewEvent(T.RUN_STARTED)], expected_seq=1)
    nats_server_own.restart(kill=True)
    await wait_reconnected(*open_own_world.opened)
    events = await eventually(
        lambda: world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})], expected_seq=2)
    )
    assert [e.seq for e in events] == [3]
    other = await open_own_world()
    listed = await other.list_events(run_id)
    assert [e.seq for e in listed] == [1, 2, 3]
    assert [e.created_at for e in listed] == sorted(e.created_at for e in listed)
    assert listed[2].created_at == events[0].created_at


async def test_an_outage_pauses_work_and_it_resumes(
    nats_server_own: NatsServer, open_own_world: OpenWorlds
) -> None:
    world = await open_own_world(request_timeout=8.0)
    run_id = new_run_id()
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w"})])
    nats_server_own.stop()

    async def come_back() -> None:
        await asyncio.sleep(1.0)
        # In this thread: the server's parent-death signal follows the thread that started
        # it (tests.servers.dying_with_us), and an executor thread may end before the test.
        nats_server_own.start()

    back = asyncio.create_task(come_back())
    # issued during the outage: waits for the reconnect instead of failing
    events = await eventually(lambda: world.append(run_id, [NewEvent(T.RUN_STARTED)]))
    await back
    assert [e.seq for e in events] == [2]
    mid = await world.enqueue("flow", {"after": True})
    d = await receive_one(world, "flow")
    assert d.message_id == mid
    await world.ack(d)


async def test_a_delivery_held_across_a_lost_connection_is_fenced(
    nats_server_own: NatsServer, open_own_world: OpenWorlds
) -> None:
    """A server that crashed can come back without the deliveries it had handed out and
    redeliver them to others, while it still confirms the old holder's renewals. So a lost
    connection ends every hold: renewals and settlements answer False (the worker then cuts
    the bodies off), and only the redelivery can settle the message."""
    world = await open_own_world(visibility_seconds=3.0)
    await world.enqueue("flow", {"v": 1})
    held = await receive_one(world, "flow")
    assert await world.renew(held)
    nats_server_own.restart(kill=True)
    await wait_reconnected(*open_own_world.opened)
    assert not await world.renew(held)
    assert not await world.ack(held)
    again = await receive_one(world, "flow", timeout=30)
    assert (again.message_id, again.payload) == (held.message_id, {"v": 1})
    assert await eventually(lambda: world.ack(again))
    assert await world.receive("flow", wait_seconds=0.3) == []


async def test_a_reconnect_wakes_every_result_waiter_to_read(
    nats_server_own: NatsServer, open_own_world: OpenWorlds
) -> None:
    """A run's end is heard as a core-NATS hint, which an outage can lose: once the client
    has reconnected, every waiter wakes and reads instead of waiting for its safety poll,
    and the ends the world held are read again before they are trusted."""
    world = await open_own_world()
    run_id, done = new_run_id(), new_run_id()
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w", "input": None})])
    created = NewEvent(T.RUN_CREATED, data={"workflow": "w", "input": None})
    await world.append(done, [created, NewEvent(T.RUN_CANCELLED, data={"reason": "x"})])
    assert await world.known_end(done) is not None
    hints = TerminalHints.of(world)
    waiter = hints.watch(run_id)
    nats_server_own.restart()
    await wait_reconnected(world)
    await asyncio.wait_for(waiter, 5)  # woken although the run has not ended
    assert not hints.heard_ended(run_id)
    hints.unwatch(run_id, waiter)
    # an end held from before the outage is read again: its id may have been used anew
    assert await world.known_end(done) is None
    assert (await world.get_run(done)).status.value == "cancelled"
