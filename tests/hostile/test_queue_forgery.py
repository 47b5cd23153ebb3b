"""Bytes written by hand into the NATS queue's side stores and headers: the hand-back notes
(``h<seq>`` in the idem bucket) and the ``Wayline-Id`` header. A bad value fences only the
message it names, with a typed error or a sane reading, never a crash of the receive loop."""

from __future__ import annotations

import asyncio

import pytest

from tests.nats_fixtures import OpenWorlds


@pytest.mark.parametrize("note", [b"x", b"\xff\xfe", b"1e9999", b"-5", b"99999999999"])
async def test_a_garbage_hand_back_note_does_not_break_receive(
    open_nats_world: OpenWorlds, note: bytes
) -> None:
    world = await open_nats_world(visibility_seconds=5)
    await world.enqueue("flow", {"runId": "wf_" + "0" * 32})
    [first] = await world.receive("flow", wait_seconds=2)
    seq = int(first.handle.msg.metadata.sequence.stream)
    assert await world.retry(first, 0)
    await world._queue._idem.put(f"h{seq}", note)  # behind the world's back
    # any error here would end the worker's receive loop (only WorldUnavailableError is
    # retried there), and the note stays: the message would never be delivered again
    [again] = await world.receive("flow", wait_seconds=2)
    assert again.message_id == first.message_id
    assert again.attempt >= 1, again.attempt  # an attempt is never below 1
    assert again.attempt <= 2, again.attempt  # a forged note never spends the budget
    assert await world.ack(again)


async def test_a_worker_keeps_consuming_after_the_queue_stream_is_deleted_and_recreated(
    open_nats_world: OpenWorlds,
) -> None:
    """Someone deletes the queue stream under a live worker; a world that starts later (a
    client, another worker) creates it again. The worker that was running resumes consuming:
    its receive loop does not end on the error it met meanwhile."""
    import wayline
    from tests.hostile import flows
    from tests.runtime.harness import settings

    world = await open_nats_world()
    client = wayline.Client(world)
    worker = wayline.Worker(world, [flows.chain_of], settings=settings())
    async with worker:
        assert await (await client.start(flows.chain_of, 2)).result(timeout=20) == 2
        await world._queue._js.delete_stream(world.names.queue_stream)
        await asyncio.sleep(1.5)  # the worker's receives meet the missing stream
        other = await open_nats_world()  # creates the stream again
        run = await wayline.Client(other).start(flows.chain_of, 3)
        assert await run.result(timeout=20) == 3
        assert worker.consuming()
