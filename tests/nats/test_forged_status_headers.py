"""Stored messages that carry a ``Status`` header of their own, published by an outsider into
the NATS world's streams on a real nats-server. The server's status answers carry no
``Nats-Sequence`` header and every stored message it returns does, so such a message is read
as a message: a direct batch goes on past it, and the runs index over it loads whole."""

from __future__ import annotations

from typing import Any

import pytest

import nats
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.errors import WorldError, WorldUnavailableError
from wayline.worlds.nats.direct import direct_batch, read_subject

_WF = "forged-status-wf"
FORGED = ("503", "404", "204", "413", "408")


async def _forge(
    world: Any, subject: str, status: str, stream: str, more: dict[str, str] | None = None
) -> None:
    """Publish a message with its own ``Status`` header on a connection of its own."""
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        headers = {"Status": status, "Description": "forged", **(more or {})}
        await nc.jetstream().publish(subject, b"{}", headers=headers, stream=stream)
    finally:
        await nc.close()


async def _forge_empty(world: Any, subjects: list[str], status: str) -> None:
    """Store an empty value with its own ``Status`` header on each KV subject."""
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        headers = {"Status": status, "Description": "forged"}
        for subject in subjects:
            await nc.jetstream().publish(subject, b"", headers=headers)
    finally:
        await nc.close()


async def test_a_direct_batch_reads_stored_messages_with_a_status_header_as_messages(
    open_nats_world: OpenWorlds,
) -> None:
    """Each forged ``Status`` value is returned as a stored message, with the server's own
    ``Nats-Sequence`` and ``Nats-Subject``, and the batch goes on to the messages after it."""
    world = await open_nats_world()
    index = world._listing.runs()
    base = f"{index.names.prefix}.ri.forged-status.{new_run_id()}"
    subject = f"{base}.*"  # the index keeps one message a subject: one subject each
    for i, status in enumerate(FORGED):
        more = {"Nats-Sequence": "999999"} if i % 2 else None  # the server's own one wins
        await _forge(world, f"{base}.f{i}", status, index.stream, more)
        await world._js.publish(f"{base}.r{i}", status.encode(), stream=index.stream)
    msgs, pending = await direct_batch(
        world._nc,
        index.stream,
        {"seq": 1, "next_by_subj": subject, "batch": 100},
        timeout=5,
        url="n",
    )
    assert pending == 0
    assert [m.data for m in msgs] == [d for s in FORGED for d in (b"{}", s.encode())]
    assert [m.headers.get("Status") for m in msgs[::2]] == list(FORGED)
    assert [m.subject.rsplit(".", 1)[1] for m in msgs[::2]] == [f"f{i}" for i in range(5)]
    seqs = [m.seq for m in msgs]
    assert seqs == sorted(seqs) and seqs[0] > 0 and seqs[-1] < 999999
    whole = await read_subject(world._nc, index.stream, subject, 0, timeout=5, url="n", batch=2)
    assert [m.seq for m in whole] == [m.seq for m in msgs]


@pytest.mark.parametrize("status", FORGED)
async def test_an_index_entry_with_a_forged_status_leaves_the_runs_whole(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A runs-index entry stored with its own ``Status`` header among real entries: the runs
    model loads, and its pages and counts show every run."""
    world = await open_nats_world()  # another process: writes the runs
    console = await open_nats_world()  # follows them, reading the index's stream
    index = world._listing.runs()
    prefix = index.names.prefix
    ids = [new_run_id() for _ in range(3)]
    forged = f"{prefix}.ri.pending.{_WF}.3ff0000000000000.{new_run_id()}"
    await _forge(world, forged, status, index.stream)  # before the entries of every run
    data = {"workflow": _WF, "input": [0]}
    for run_id in ids:
        await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0)
    assert await world.flush_runs_index()
    await console.follow_runs()
    model = await console.runs_followed(30.0)
    assert model is not None, "the runs index was not loaded in memory"
    assert set(ids) <= set(model.runs)
    page = await console.runs_page(after=None, limit=10, workflow=_WF)
    assert sorted(r.run_id for r in page) == sorted(ids)
    counts = await console.count_runs(workflow=_WF)
    assert counts.get(RunStatus.PENDING) == 3


@pytest.mark.parametrize("status", ["404", "408", "503"])
async def test_a_queue_message_with_a_forged_status_is_received_as_data(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A queue message stored with its own ``Status`` header between two enqueued ones: a
    receive hands over all three, the forged one as a delivery like any other, and none is
    held back or taken for the end of the pull."""
    world = await open_nats_world()
    topic = f"forged-status-{status}"
    await world.enqueue(topic, {"runId": "first"})
    [stored] = await read_subject(
        world._nc, world.names.queue_stream, world.names.queue_wildcard, 0, timeout=5, url="n"
    )
    sibling = stored.subject.rsplit(".", 1)[0] + ".forgedmid"
    await _forge(world, sibling, status, world.names.queue_stream)
    await world.enqueue(topic, {"runId": "last"})
    got: list[Any] = []
    for _ in range(5):
        got += await world.receive(topic, max_messages=10, wait_seconds=1)
        if len(got) >= 3:
            break
    assert sorted(str(d.payload) for d in got) == sorted(
        ["{'runId': 'first'}", "{'runId': 'last'}", "{}"]
    ), got


@pytest.mark.parametrize("status", ["503", "204"])
async def test_an_event_with_a_forged_status_is_read_as_data_of_its_run(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A message stored on a run's events subject with its own ``Status`` header: the run's
    read does not fail as unavailable nor end at it; it reads the run's events with the
    forged one taken as data (a clear error or a corrupt run, never a stall)."""
    world = await open_nats_world()
    run_id = new_run_id()
    data = {"workflow": _WF, "input": [0]}
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0)
    subject = world.names.run_subject(run_id)
    await _forge(world, subject, status, world.names.events_stream)
    try:
        info, events = await world.read_run(run_id)
    except WorldUnavailableError as err:
        pytest.fail(f"the forged status was taken for the server's: {err}")
    except WorldError as err:  # a clear error about the junk is fine
        assert "unavailable" not in str(err).lower()
        return
    assert info is not None and info.run_id == run_id
    assert [e.type for e in events][:1] == [EventType.RUN_CREATED]


@pytest.mark.parametrize("status", ["404", "503", "408"])
async def test_a_hook_claim_entry_with_a_forged_status_is_read_as_its_empty_value(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A hook-token entry stored empty with its own ``Status`` header is read as the empty
    value it is (unreadable: the next claim overwrites it), not as "no entry" (every claim of
    the token gave up as contended) nor as the server's error."""
    from wayline._core.events import EventType as T
    from wayline.world import entries
    from wayline.worlds.nats.names import kv_key

    world = await open_nats_world()
    token = f"forged-claim-{status}-{new_run_id()}"
    bucket = world._log.claims._names.hooks_bucket
    await _forge_empty(world, [f"$KV.{bucket}.{kv_key(token)}"], status)
    entry = await world._log.claims._kv_entry(kv_key(token))
    assert entry is not None, "the forged status was taken for the server's 'not found'"
    assert isinstance(entry[1], entries.Unreadable) and "empty" in str(entry[1])
    run_id = new_run_id()
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": _WF, "input": {}})])
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    await world.append(run_id, [NewEvent(T.HOOK_CREATED, "h1", {"token": token})], expected_seq=2)
    found = await world.get_hook(token)
    assert found is not None and (found.run_id, found.active) == (run_id, True)


@pytest.mark.parametrize("status", ["404", "503", "408"])
async def test_a_buffered_payload_entry_with_a_forged_status_is_read_as_its_empty_value(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A buffered-payload entry stored empty with its own ``Status`` header is read as the
    empty value it is (nothing buffered, overwritten by the next store), not as "no entry"
    (every store gave up as contended) nor as the server's error."""
    from wayline.world.hook_buffer import BufferedPayload
    from wayline.worlds.nats.hook_buffer import _key

    world = await open_nats_world()
    store = world.hook_buffer()
    token = f"forged-buf-{status}-{new_run_id()}"
    await store.get("ns", "warm")  # makes the bucket
    await _forge_empty(world, [f"$KV.{store.bucket}.{_key('ns', token)}"], status)
    assert await store.get("ns", token) is None
    now = world.now()
    entry = BufferedPayload("ns", token, "e1", {"v": token}, now, now + 60)
    assert await store.store(entry) == entry
    assert await store.get("ns", token) == entry


@pytest.mark.parametrize("status", ["404", "503", "408"])
async def test_slot_and_rate_entries_with_a_forged_status_are_read_as_their_empty_values(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A concurrency-slot and a rate-limit entry stored empty with their own ``Status``
    header are read as the empty values they are (no holders, a full bucket), and the next
    write overwrites them, not as "no entry" (every write gave up as contended) nor as the
    server's error."""
    from wayline.worlds.nats.names import kv_key

    world = await open_nats_world()
    key = f"forged-limit-{status}-{new_run_id()}"
    slots = world._slot_store()
    await slots.acquire("warm", "h0", 1, None, None)  # makes the buckets
    await world.take_token("warm", 1.0, 1)
    buckets = (slots.bucket, world._rates.bucket)
    await _forge_empty(world, [f"$KV.{b}.{kv_key(key)}" for b in buckets], status)
    assert await slots.acquire(key, "h1", 1, 60.0, None) == (True, ["h1"])
    assert await slots.acquire(key, "h2", 1, 60.0, None) == (False, ["h1"])
    assert await world.take_token(key, 0.001, 1) == 0.0
    assert await world.take_token(key, 0.001, 1) > 0.0


@pytest.mark.parametrize("status", ["404", "503", "408"])
async def test_a_registry_entry_with_a_forged_status_is_read_as_its_empty_value(
    open_nats_world: OpenWorlds, status: str
) -> None:
    """A worker-registry entry stored empty with its own ``Status`` header is read as the
    empty value it is, and the heartbeat overwrites it, not as "no entry" (the heartbeat's
    create failed) nor as the server's error."""
    import asyncio
    import time

    from wayline.worlds.nats.names import kv_key

    world = await open_nats_world()
    workflow = f"forged-reg-{status}-{new_run_id()}"
    now = time.time()
    entry = {"key": f"|{workflow}|id|1", "workflow": workflow, "identity": "id", "revision": 1}
    entry |= {"queue": None, "worker": "w1", "seenAt": now, "liveUntil": now + 60}
    await world._registry.served()  # makes the bucket
    subject = f"$KV.{world.names.served_bucket}.{kv_key(str(entry['key']))}"
    await _forge_empty(world, [subject], status)
    await asyncio.wait_for(world.record_served([entry]), 30)  # a guard against a stall
    assert workflow in [e.get("workflow") for e in await world.list_served()]
