"""NATS-specific queue behaviour: raw messages, key crash windows, isolation, dead letters."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import textwrap
import time
import uuid
from typing import Any

from tests.nats_fixtures import NatsServer, OpenWorlds, queue_emptied
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.nats import wire
from wayline.worlds.nats.names import key_token, kv_key


async def test_a_malformed_message_arrives_with_payload_none(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    js = world._queue._js
    for raw in (b"not json", b"[1, 2]"):
        await js.publish(world.names.target_subject("flow", uuid.uuid4().hex), raw)
    got = await world.receive("flow", max_messages=5, wait_seconds=2)
    assert [(d.payload, d.raw, d.attempt) for d in got] == [
        (None, b"not json", 1),
        (None, b"[1, 2]", 1),
    ]
    for d in got:
        await world.dead_letter(d, "malformed payload")
    letters = await world.list_dead_letters()
    assert [dl["payload"] for dl in letters] == ["[1, 2]", "not json"]  # newest first
    assert set(letters[0]) == {"messageId", "topic", "payload", "attempts", "reason", "createdAt"}
    assert letters[0]["messageId"] == got[1].message_id and letters[0]["attempts"] == 1
    assert abs(letters[0]["createdAt"] - time.time()) < 30
    assert len(await world.list_dead_letters(limit=1)) == 1
    assert await world.receive("flow", wait_seconds=0.2) == []


async def test_topic_names_that_are_not_subject_tokens(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    await world.enqueue("a.b c>*", {"n": 1})
    await world.enqueue("a", {"n": 2})
    [d] = await world.receive("a.b c>*", wait_seconds=2)
    assert d.payload == {"n": 1} and d.topic == "a.b c>*"
    await world.ack(d)
    [d] = await world.receive("a", wait_seconds=2)
    assert d.payload == {"n": 2}
    await world.ack(d)


async def test_a_keyed_publish_retried_after_a_lost_ack_answers_its_own_message(
    open_nats_world: OpenWorlds,
) -> None:
    """The retry of a publish whose ack was lost (same Nats-Msg-Id) is refused as held by
    the message the first attempt stored, and answers that message's id: one message."""
    world = await open_nats_world()
    queue = world._queue
    mid, body = uuid.uuid4().hex, json.dumps({"once": True}).encode()
    first, stored = await queue._enqueue_keyed("flow", "t", mid, body, None, key_token("k"))
    assert stored is True
    again = await queue._enqueue_keyed("flow", "t", mid, body, None, key_token("k"))
    assert again == (first, False)  # refused: the first attempt's message answers
    got = await world.receive("flow", max_messages=5, wait_seconds=1)
    assert [(d.message_id, d.payload) for d in got] == [(first, {"once": True})]
    await world.ack(got[0])


async def test_a_key_is_held_across_topics_and_by_a_pending_schedule(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    delayed = await world.enqueue("a", {"v": 1}, idempotency_key="k", delay_seconds=0.5)
    assert await world.enqueue("b", {"v": 2}, idempotency_key="k") == delayed
    assert await world.enqueue("a", {"v": 3}, idempotency_key="k") == delayed
    [d] = await world.receive("a", wait_seconds=3)
    assert (d.message_id, d.payload) == (delayed, {"v": 1})
    assert await world.enqueue("b", {"v": 4}, idempotency_key="k") == delayed  # in flight
    assert await world.ack(d) is True
    fresh = await world.enqueue("b", {"v": 5}, idempotency_key="k")
    assert fresh != delayed
    [d] = await world.receive("b", wait_seconds=2)
    assert (d.message_id, d.payload) == (fresh, {"v": 5})
    await world.ack(d)
    assert await world.receive("a", wait_seconds=0.2) == []


async def test_a_claim_left_in_the_idem_bucket_by_an_older_version_is_ignored(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    body = base64.b64encode(b"{}").decode()
    claim = {"mid": uuid.uuid4().hex, "topic": "flow", "body": body, "published": False}
    await world._queue._idem.put(kv_key("k"), json.dumps(claim).encode())
    mid = await world.enqueue("flow", {"fresh": True}, idempotency_key="k")
    [d] = await world.receive("flow", wait_seconds=2)
    assert (d.message_id, d.payload) == (mid, {"fresh": True})
    await world.ack(d)


async def test_concurrent_enqueues_under_one_key_make_one_message(
    open_nats_world: OpenWorlds,
) -> None:
    worlds = [await open_nats_world() for _ in range(3)]
    ids = await asyncio.gather(
        *(worlds[i % 3].enqueue("flow", {"i": i}, idempotency_key="one") for i in range(12))
    )
    assert len(set(ids)) == 1
    got = await worlds[0].receive("flow", max_messages=20, wait_seconds=1)
    assert len(got) == 1 and got[0].message_id == ids[0]
    await worlds[0].ack(got[0])


async def test_two_prefixes_on_one_server_are_isolated(
    nats_world_factory: Any, nats_server: NatsServer
) -> None:
    from wayline.worlds.nats import NatsWorld

    tag = uuid.uuid4().hex[:8]
    a = NatsWorld(nats_server.url, prefix=f"iso_a_{tag}")
    b = NatsWorld(nats_server.url, prefix=f"iso_b_{tag}")
    await a.start()
    await b.start()
    try:
        run_id = new_run_id()
        await a.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w"})])
        await a.append(run_id, [NewEvent(T.RUN_STARTED)])
        await a.append(run_id, [NewEvent(T.HOOK_CREATED, "h", {"token": "shared"})])
        assert await b.get_run(run_id) is None and await b.list_runs() == []
        assert await b.get_hook("shared") is None
        # the same run id and token are free in the other prefix
        await b.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w"})], expected_seq=0)
        await b.append(run_id, [NewEvent(T.RUN_STARTED)])
        await b.append(run_id, [NewEvent(T.HOOK_CREATED, "h", {"token": "shared"})])
        await a.enqueue("flow", {"from": "a"}, idempotency_key="k")
        await b.enqueue("flow", {"from": "b"}, idempotency_key="k")
        [da] = await a.receive("flow", wait_seconds=2)
        [db] = await b.receive("flow", wait_seconds=2)
        assert (da.payload, db.payload) == ({"from": "a"}, {"from": "b"})
        await a.ack(da)
        await b.ack(db)
        assert await a.receive("flow", wait_seconds=0.2) == []
    finally:
        await a.close()
        await b.close()


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from wayline.worlds.nats import NatsWorld

    async def main():
        world = NatsWorld(sys.argv[1], prefix=sys.argv[2], visibility_seconds=1)
        await world.start()
        while True:
            got = await world.receive("flow", wait_seconds=1)
            if got:
                print("held", got[0].message_id, got[0].attempt, flush=True)
                await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_a_delivery_held_by_a_killed_process_comes_back(
    open_nats_world: OpenWorlds, nats_server: NatsServer
) -> None:
    world = await open_nats_world(visibility_seconds=1)
    mid = await world.enqueue("flow", {"x": 1})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDER,
        nats_server.url,
        world.prefix,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        assert holder.stdout is not None
        line = await asyncio.wait_for(holder.stdout.readline(), 30)
        assert line.split() == [b"held", mid.encode(), b"1"]
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # only the process this test started
        await holder.wait()
    [again] = await world.receive("flow", wait_seconds=5)
    assert (again.message_id, again.attempt) == (mid, 2)
    await world.ack(again)


async def test_a_deleted_consumer_is_created_again(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    await world.enqueue("flow", {"x": 0})
    [first] = await world.receive("flow", wait_seconds=2)  # the consumer of q.t
    await world.ack(first)
    await queue_emptied(world)  # the ack is read before the consumer goes
    await world._queue._js.delete_consumer(world.names.queue_stream, "q_flow")
    mid = await world.enqueue("flow", {"x": 1})
    got: list[Any] = []
    for _ in range(3):
        got = await world.receive("flow", wait_seconds=1)
        if got:
            break
    assert [d.message_id for d in got] == [mid]
    await world.ack(got[0])


async def test_an_ack_the_server_never_read_leaves_the_message_to_its_next_holder(
    open_nats_world: OpenWorlds,
) -> None:
    """After a server crash the consumer may have forgotten a delivery, and an ack sent then
    is never read. The message is then not deleted from the stream (that would remove it for
    whoever holds it next): it comes back, and its next holder's ack removes it and releases
    its key. An ack is sent without waiting for a reply, so ``ack`` answers True (sent while
    held); it cannot tell a lost one, and needs not: the message's return is the remedy."""
    world = await open_nats_world(request_timeout=1.0, visibility_seconds=1.0)
    mid = await world.enqueue("flow", {"x": 1}, idempotency_key="k")
    [d] = await world.receive("flow", wait_seconds=2)
    lost = d.handle.msg.reply + ".lost"
    d.handle.msg.reply = lost  # no one reads this subject: the ack is lost
    assert await world.ack(d) is True
    assert await world.ack(d) is False  # settled once
    assert await world.enqueue("flow", {"x": 2}, idempotency_key="k") == mid  # still held
    [again] = await world.receive("flow", wait_seconds=5)
    assert (again.message_id, again.attempt) == (mid, 2)
    assert await world.ack(again) is True
    await queue_emptied(world)
    fresh = await world.enqueue("flow", {"x": 3}, idempotency_key="k")
    assert fresh != mid
    [d] = await world.receive("flow", wait_seconds=2)
    assert d.payload == {"x": 3}
    await world.ack(d)
    await queue_emptied(world)
    assert await world.receive("flow", wait_seconds=0.3) == []
    again = await world.enqueue("flow", {"x": 2}, idempotency_key="k")
    assert again != mid
    [d] = await world.receive("flow", wait_seconds=2)
    assert d.payload == {"x": 2}
    await world.ack(d)


async def test_an_ack_of_a_handed_back_message_waits_for_the_servers_confirmation(
    open_nats_world: OpenWorlds,
) -> None:
    """A message handed back (a graceful shutdown) has a note counting its hand-backs, removed
    after its ack: that ack waits for the server's reply, and one that goes unconfirmed answers
    False and leaves the note (the message's next delivery still is not an attempt more)."""
    world = await open_nats_world(request_timeout=1.0, visibility_seconds=1.0)
    await world.enqueue("flow", {"x": 1})
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.release(d) is True
    [d] = await world.receive("flow", wait_seconds=5)
    assert d.handle.handbacks == 1 and d.attempt == 1
    d.handle.msg.reply = d.handle.msg.reply + ".lost"  # unconfirmed
    assert await world.ack(d) is False
    [d] = await world.receive("flow", wait_seconds=5)
    assert d.attempt == 2 and d.handle.handbacks == 1  # the note survived
    assert await world.ack(d) is True
    await queue_emptied(world)


async def test_held_hand_backs_are_noted_apart_and_a_note_that_is_not_counts_none(
    open_nats_world: OpenWorlds,
) -> None:
    """Hand-backs over a pause are noted under ``g<seq>`` beside the ``h<seq>`` note that a
    version reading only ``h`` keeps using: a message with no ``g`` note (handed back by such
    a version, or for a slot's wait) has none; the note names the delivery that made it
    (``<count>@<num_delivered>``) and counts only for the next one; bytes that are not a count
    no higher than the hand-backs, made by the delivery just before, count none; and the ack
    drops both notes, a note that counted none too."""
    import nats.js.errors
    import pytest

    world = await open_nats_world()
    idem = world._queue._idem
    await world.enqueue("flow", {"x": 1})
    [d] = await world.receive("flow", wait_seconds=2)
    seq = d.handle.msg.metadata.sequence.stream
    assert await world.release(d)  # as an older version, or a slot's wait, hands it back
    [d] = await world.receive("flow", wait_seconds=5)
    assert (d.attempt, d.handbacks, d.held_handbacks) == (1, 1, 0)
    assert await world.release(d, held=True)
    assert (await idem.get(f"g{seq}")).value == b"1@2"  # by the second delivery
    # 3@5: more than the 2 hand-backs noted under h (by the delivery before, the 5th); 2@2
    # and 1@5: not by the delivery before (the 6th and the 7th)
    for junk in (b"x", b"-1", b"2", b"3@5", b"2@2", b"1@5", b"1@", b"@3", b"1@3@3"):
        await idem.put(f"g{seq}", junk)
        [d] = await world.receive("flow", wait_seconds=5)
        assert (d.handbacks, d.held_handbacks) == (2, 0), junk
        assert await world.retry(d, 0)
    delivered = d.handle.msg.metadata.num_delivered
    await idem.put(f"g{seq}", f"2@{delivered}".encode())
    [d] = await world.receive("flow", wait_seconds=5)
    assert (d.attempt, d.handbacks, d.held_handbacks) == (delivered - 1, 2, 2)
    assert await world.retry(d, 0)
    await idem.put(f"g{seq}", f"2@{delivered}".encode())  # a stray: it counts none, but goes
    [d] = await world.receive("flow", wait_seconds=5)
    assert (d.handbacks, d.held_handbacks) == (2, 0)
    assert await world.ack(d)
    for note in (f"h{seq}", f"g{seq}"):
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await idem.get(note)
    await queue_emptied(world)


async def test_an_idle_consumer_waits_with_one_pull_and_a_backlog_is_taken_in_batches(
    open_nats_world: OpenWorlds,
) -> None:
    """A receive on a consumer whose last pull left nothing pending waits at once: one pull
    request a message, not a batch request answered "none" and then a wait. A backlog that
    came meanwhile is still taken whole, in batches, each message once."""
    world = await open_nats_world()
    await world.enqueue("flow", {"i": -1})  # the default level's consumer made, then drained
    [first] = await world.receive("flow", wait_seconds=2)
    await world.ack(first)
    assert await world.receive("flow", wait_seconds=0) == []
    pulls: list[dict[str, Any]] = []
    publish = wire.publish  # what the world sends its pulls with

    async def counted(nc: Any, subject: str, payload: bytes = b"", **kwargs: Any) -> Any:
        if ".CONSUMER.MSG.NEXT." in subject:
            pulls.append(json.loads(payload))
        return await publish(nc, subject, payload, **kwargs)

    wire.publish = counted  # type: ignore[assignment]
    try:
        for i in range(3):  # one at a time, as a worker waiting for the next run sees them
            waiting = asyncio.ensure_future(world.receive("flow", max_messages=10, wait_seconds=5))
            await asyncio.sleep(0.1)
            mid = await world.enqueue("flow", {"i": i})
            got = await asyncio.wait_for(waiting, 10)
            assert [d.message_id for d in got] == [mid]
            assert await world.ack(got[0])
        assert len(pulls) == 3 and all("no_wait" not in p for p in pulls), pulls

        sent = {await world.enqueue("flow", {"i": i}) for i in range(25)}
        pulls.clear()
        taken: list[str] = []
        while len(taken) < len(sent):
            got = await world.receive("flow", max_messages=10, wait_seconds=5)
            assert got
            for d in got:
                taken.append(d.message_id)
                assert await world.ack(d)
        assert sorted(taken) == sorted(sent)
        # the first wait hands over one message and names the backlog: batches follow
        assert [p.get("batch") for p in pulls][:2] == [1, 10], pulls
        assert len(pulls) <= 5, pulls

        # redeliveries are not counted as pending: one sends the next receive to batches
        # (a review found ten handed back taken one pull each)
        again = {await world.enqueue("flow", {"i": i}) for i in range(10)}
        held = []
        while len(held) < len(again):
            held += await world.receive("flow", max_messages=10, wait_seconds=5)
        for d in held:
            assert await world.retry(d, 0)
        sizes: list[int] = []
        while sum(sizes) < len(again):
            got = await world.receive("flow", max_messages=10, wait_seconds=5)
            assert got and all(d.message_id in again for d in got)
            sizes.append(len(got))
            for d in got:
                assert await world.ack(d)
        assert sum(sizes) == len(again) and len(sizes) <= 3, sizes
    finally:
        wire.publish = publish  # type: ignore[assignment]


async def test_a_worker_of_a_shorter_visibility_never_shortens_what_others_hold(
    open_nats_world: OpenWorlds,
) -> None:
    """A rolling upgrade that lowers ``WAYLINE_VISIBILITY_SECONDS``: the topic's consumer is
    shared, and the new world used to write its ``ack_wait`` over it, so the server redelivered
    (to the new worker) a message an old worker held and renews only every 10 s. The consumer
    keeps the longest visibility asked for; a longer one raises it."""
    old = await open_nats_world(visibility_seconds=30)
    new = await open_nats_world(visibility_seconds=2)
    mid = await old.enqueue("flow", {"x": 1})
    [held] = await old.receive("flow", wait_seconds=2)
    assert await new.receive("flow", wait_seconds=3.5) == []  # past the new world's 2 s
    assert await old.renew(held) is True
    await old.ack(held)
    info = await old._queue._js.consumer_info(old.names.queue_stream, "q_flow")
    assert info.config.ack_wait == 30
    # the other way round: a worker of a longer visibility comes second and raises it
    await new.enqueue("step", {"x": 2})
    [short] = await new.receive("step", wait_seconds=2)
    await new.ack(short)
    longer = await open_nats_world(visibility_seconds=45)
    await new.enqueue("step", {"x": 3})  # a level's consumer is used once it holds a message
    [third] = await longer.receive("step", wait_seconds=2)
    await longer.ack(third)
    info = await old._queue._js.consumer_info(old.names.queue_stream, "q_step")
    assert info.config.ack_wait == 45
    assert mid == held.message_id
