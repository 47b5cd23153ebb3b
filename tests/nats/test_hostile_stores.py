"""Bytes an outsider writes, on a connection of its own, into the NATS world's stores other
than the event log and the registry (``test_bucket_listings``), on a real nats-server. Each is
passed over, overwritten or refused with a clear error; nothing of a run is lost or decided
from it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import nats
import wayline
from tests.blobs import flows
from tests.blobs.stores import blobs_of, object_name, stored
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import settings, wait_for
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import BlobMissingError
from wayline.worlds.nats import gather
from wayline.worlds.nats.codec import parse_stamp
from wayline.worlds.nats.direct import read_subject
from wayline.worlds.nats.names import key_token, kv_key
from wayline.worlds.nats.streams import subject as stream_subject

FORGED = 978307200.0  # 2001-01-01T00:00:00Z


async def _outsider(world: Any) -> Any:
    return await nats.connect(world._options.servers, max_reconnect_attempts=0)


async def _forge(world: Any, subject: str, data: bytes) -> None:
    """Publish ``data`` on ``subject`` as an outsider does: a connection of its own."""
    nc = await _outsider(world)
    try:
        await nc.jetstream().publish(subject, data)
    finally:
        await nc.close()


async def _echoed(world: Any, value: str) -> Any:
    """A run of ``flows.echo`` with ``value`` (out of line), to its end."""
    async with wayline.Worker(world, [flows.echo], settings=settings()):
        run = await wayline.Client(world).start(flows.echo, value)
        assert await run.result(timeout=60) == value
    return run


@wayline.workflow
async def hostile_archived() -> int:
    return 1


async def test_a_forged_archive_copy_keeps_the_run(open_nats_world: OpenWorlds) -> None:
    """The archive's copies carry a ``Nats-Msg-Id`` anyone can work out; junk published under
    it first made the real copy a duplicate, and the run was purged with nothing archived. The
    run is now kept (and archived once the forged id is out of the dedupe window)."""
    world = await open_nats_world()
    async with wayline.Worker(world, [hostile_archived], settings=settings()):
        run = await wayline.Client(world).start(hostile_archived)
        assert await run.result(timeout=20) == 1
    names = world.names
    first = (
        await read_subject(
            world._nc, names.events_stream, names.run_subject(run.run_id), 0, timeout=5, url="n"
        )
    )[0].seq
    nc = await _outsider(world)
    try:
        await nc.jetstream().publish(
            names.archive_subject(run.run_id),
            b"junk",
            headers={"Nats-Msg-Id": f"ar-{run.run_id}-0-{first}"},
        )
    finally:
        await nc.close()
    assert await world.archive_runs(older_than=0) == 0
    info = await world.get_run(run.run_id)
    assert info is not None and info.output == 1


async def test_a_forged_dead_letter_record_does_not_replace_the_real_one(
    open_nats_world: OpenWorlds,
) -> None:
    """A dead-letter record's ``Nats-Msg-Id`` names the queue message's sequence: junk
    published under it first made the real record a duplicate, and the message was acked
    away with no record of it."""
    world = await open_nats_world()
    await world.enqueue("jobs", {"runId": "x"})
    [delivery] = await world.receive("jobs", wait_seconds=2)
    nc = await _outsider(world)
    try:
        await nc.jetstream().publish(
            world.names.dlq_subject,
            b'{"messageId": "forged"}',
            headers={"Nats-Msg-Id": f"dl-{world.names.queue_stream}-{delivery.message_id}"},
        )
    finally:
        await nc.close()
    assert await world.dead_letter(delivery, "poison")
    records = await world.list_dead_letters()
    ours = [r for r in records if r.get("messageId") == str(delivery.message_id)]
    assert [r["reason"] for r in ours] == ["poison"], records


@pytest.mark.parametrize(
    ("where", "junk"),
    [("q.s.jobs", b"junk"), ("q.t.nobody", b"junk"), ("q.t.nobody", b"{}")],
)
async def test_junk_under_an_idempotency_key_does_not_swallow_the_enqueue(
    open_nats_world: OpenWorlds, where: str, junk: bytes
) -> None:
    """Junk under a key's subject (on a schedule subject without a schedule, or a topic no
    one consumes) held the key for good: the keyed enqueue answered with the junk's id and
    stored nothing (a start keyed ``<run>:start`` left its run pending, and each re-send of
    the lost-start pass was swallowed too)."""
    world = await open_nats_world()
    key = f"{new_run_id()}:start"
    nc = await _outsider(world)
    try:
        await nc.jetstream().publish(f"{world.prefix}.{where}.{key_token(key)}", junk)
    finally:
        await nc.close()
    await world.enqueue("jobs", {"runId": "x"}, idempotency_key=key)
    got = await world.receive("jobs", wait_seconds=2)
    assert [d.payload for d in got] == [{"runId": "x"}]
    # the key holds again, now for the real message
    again = await world.enqueue("jobs", {"runId": "y"}, idempotency_key=key)
    assert again == got[0].message_id


async def test_a_forged_stamp_is_not_taken_as_the_events_time(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events' time comes from the server's republish of each stored message, on a core
    subject anyone can publish to: a stamp forged for the sequence an append is about to get
    became the events' time (durably: a sleep computed from it ended at once)."""
    world = await open_nats_world()
    nc = await _outsider(world)
    real = gather.publish_retried  # (the event log publishes through gather.py)
    log = world._events()

    async def then_forge(*args: Any, **kwargs: Any) -> Any:
        acked = await real(*args, **kwargs)
        await asyncio.sleep(0.3)  # the real republish is in: the forged one replaces it
        await nc.publish(
            f"{world.prefix}.evts.x",
            b"",
            headers={
                "Nats-Subject": args[1],
                "Nats-Sequence": str(acked.seq),
                "Nats-Time-Stamp": "2001-01-01T00:00:00Z",
            },
        )
        await nc.flush()

        async def forged_in() -> bool:
            return log._stamps.get(acked.seq) == FORGED

        await wait_for(forged_in, timeout=5)
        return acked

    monkeypatch.setattr(gather, "publish_retried", then_forge)
    try:
        data = {"workflow": "wf", "input": {"args": []}}
        [created] = await world.append(
            new_run_id(), [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0
        )
    finally:
        await nc.close()
    assert abs(created.created_at - time.time()) < 60


def test_a_stamp_whose_fraction_is_not_digits_is_refused() -> None:
    assert parse_stamp("2026-12-02T12:33:03.187948414Z") == pytest.approx(1796214783.187948414)
    for bad in (
        "2001-01-01T00:00:00.1e999Z",
        "2001-01-01T00:00:00.nanZ",
        "2001-01-01T00:00:00.-1Z",
    ):
        with pytest.raises(ValueError):
            parse_stamp(bad)


@pytest.mark.parametrize(
    "junk",
    [
        b"\xff not json",
        b"[" * 100_000 + b"]" * 100_000,
        b"[1, 2]",
        b'{"holders": 5}',
        b'{"holders": [1, {"x": 1}]}',
        b'{"holders": ["a"], "leases": {"a": "soon"}}',
        b'{"holders": ["a"], "leases": [1]}',
        b'{"holders": ["a"], "leases": {"a": ' + b"9" * 400 + b"}}",
        b'{"holders": ["a"], "tokens": [1]}',
        b'{"holders": ["a"], "tokens": {"a": 5}}',
    ],
    ids=lambda j: repr(j[:24]),
)
async def test_junk_under_a_slot_key_holds_no_slot(
    open_nats_world: OpenWorlds, junk: bytes
) -> None:
    """Junk under a concurrency limit's key raised (JSONDecodeError, TypeError, OverflowError
    ...) in every delivery that took or gave back a slot of the key: its runs stayed pending
    and its steps running, for good. Junk holds nothing, and the next write replaces it."""
    world = await open_nats_world()
    assert (await world.acquire_slot("warm", "h0", 1, lease=5))[0]  # the bucket exists
    nc = await _outsider(world)
    try:
        kv = await nc.jetstream().key_value(f"{world.prefix}_slots")
        await kv.put(kv_key("wf:k"), junk)
    finally:
        await nc.close()
    assert await world.acquire_slot("wf:k", "h1", 1, lease=30) == (True, ["h1"])
    assert await world.acquire_slot("wf:k", "h2", 1, lease=30) == (False, ["h1"])
    await world.release_slot("wf:k", "h1")
    assert await world.acquire_slot("wf:k", "h2", 1, lease=30) == (True, ["h2"])


@wayline.step
async def hostile_stream_writer(n: int) -> int:
    out = wayline.stream("out")
    for i in range(n):
        await out.write({"i": i})
    await out.close()
    return n


@wayline.workflow
async def hostile_streams(n: int) -> int:
    return await hostile_stream_writer(n)


async def test_junk_in_a_step_stream_is_no_record(open_nats_world: OpenWorlds) -> None:
    """A step stream's subject takes anyone's bytes: junk there failed the step that writes
    the stream (its first write reads the stream: JSONDecodeError, a healthy run FAILED after
    its retries), and made `runs tail` and ``Client.stream`` raise. Bytes that are not a JSON
    object are no record (no index); an object a step did not write is skipped by the
    readers and the writer."""
    world = await open_nats_world()
    await world.write_stream("wf_" + "2" * 32, "warm", [{"kind": "data"}])  # the stream exists
    run_id = new_run_id()
    nc = await _outsider(world)
    try:
        for junk in (
            b"not json",
            b"[1]",
            b'{"kind": "data", "attempt": "x", "step": "s1"}',
            b'{"kind": "close"}',
        ):
            await nc.jetstream().publish(stream_subject(world.names, run_id, "out"), junk)
    finally:
        await nc.close()
    async with wayline.Worker(world, [hostile_streams], settings=settings()):
        run = await wayline.Client(world).start_with(
            wayline.StartOptions(run_id=run_id), hostile_streams, 3
        )
        assert await run.result(timeout=30) == 3
    chunks = [c async for c in wayline.Client(world).stream(run_id, "out", follow=False)]
    assert [c.data for c in chunks] == [{"i": 0}, {"i": 1}, {"i": 2}]
    # the JSON objects hold indexes (a record is any object, on both worlds), the rest none
    assert [c.index for c in chunks] == [2, 3, 4]
    later = [c async for c in wayline.Client(world).stream(run_id, "out", 4, follow=False)]
    assert [c.data for c in later] == [{"i": 2}]


@pytest.mark.parametrize(
    "meta",
    [b"[1]", b'{"name": 5}', b'{"name": "x", "nuid": ">", "chunks": 1, "size": 3}'],
    ids=["list", "wrong-types", "wildcard-nuid"],
)
async def test_junk_over_a_payloads_meta_fences_its_run(
    open_nats_world: OpenWorlds, meta: bytes
) -> None:
    """Junk written over an out-of-line payload's meta message made every read of the run a
    plain WorldError (retried as if the server were away, for good); the payload is missing,
    and its run is fenced as such, as when the object is deleted."""
    world = await open_nats_world()
    value = "m" * flows.MIB
    run = await _echoed(world, value)
    store = blobs_of(world).store
    name = await object_name(world, run.run_id, value)
    await _forge(world, store._meta_subject(name), meta)
    fresh = await open_nats_world()  # nothing cached
    with pytest.raises(BlobMissingError):
        await fresh.list_events(run.run_id)


@pytest.mark.parametrize("nuid", [">", "another"])
async def test_a_forged_meta_does_not_make_a_cleanup_take_another_runs_payload(
    open_nats_world: OpenWorlds, nuid: str
) -> None:
    """A cleanup deleted a run's objects with nats-py's delete, which purges whatever chunk
    subject the meta names: a meta written by hand over an ended run's payload naming ``>``
    (or a live run's nuid) took every object's chunks (or the live run's) with it."""
    world = await open_nats_world()
    ended, live = "a" * flows.MIB, "b" * flows.MIB
    done = await _echoed(world, ended)
    waiting = await wayline.Client(world).start(flows.echo, live)  # no worker: not ended
    store = blobs_of(world).store
    input_name = await object_name(world, waiting.run_id, {"args": [live]})
    _, info = await store._meta(input_name)
    assert info is not None
    ended_name = await object_name(world, done.run_id, ended)
    forged = {
        "name": ended_name,
        "bucket": store.bucket,
        "nuid": ">" if nuid == ">" else info.nuid,
        "size": 1,
        "chunks": 1,
    }
    await _forge(world, store._meta_subject(str(forged["name"])), json.dumps(forged).encode())
    assert await world.delete_runs(older_than=0) == 1
    assert await stored(world, waiting.run_id, {"args": [live]})


async def test_a_meta_without_its_chunks_named_does_not_stop_a_cleanup(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    value = "c" * flows.MIB
    run = await _echoed(world, value)
    store = blobs_of(world).store
    name = await object_name(world, run.run_id, value)
    await _forge(world, store._meta_subject(name), json.dumps({"name": name}).encode())
    assert await world.delete_runs(older_than=0) == 1


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_a_keyed_message_nested_deep_keeps_its_key(open_nats_world: OpenWorlds) -> None:
    """A payload that encodes but is nested past what a reader deeper in the stack decodes is
    still a message this world wrote: its key is not taken for junk (and it is not removed)."""
    world = await open_nats_world()
    key = f"deep-{new_run_id()}"
    for depth in range(1000, 800, -1):  # the deepest payload the enqueue itself encodes
        try:
            first = await world.enqueue(
                "jobs", {"runId": "x", "p": _nested(depth)}, idempotency_key=key
            )
            break
        except RecursionError:
            continue
    again = await world.enqueue("jobs", {"runId": "x", "p": _nested(depth)}, idempotency_key=key)
    assert again == first
