"""NATS-specific event-log behaviour: lost acks, stale projections, stale hook claims."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.errors import HookTokenConflictError, RunNotFoundError, SequenceConflictError
from wayline.worlds.nats import direct, hook_claims
from wayline.worlds.nats.names import kv_key


async def _run(world: Any, workflow: str = "wf") -> str:
    run_id = new_run_id()
    await world.append(
        run_id, [NewEvent(T.RUN_CREATED, data={"workflow": workflow, "input": {"a": 1}})]
    )
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    return run_id


def _lose_acks(
    world: Any, times: int, monkeypatch: pytest.MonkeyPatch, between: Any = None
) -> list[int]:
    """Make the next ``times`` event publishes land on the server but lose their ack."""
    import nats.errors

    real = direct.publish_acked
    lost: list[int] = []

    async def publish(nc: Any, subject: str, payload: bytes, *args: Any) -> Any:
        ack = await real(nc, subject, payload, *args)
        if len(lost) < times and ".ev." in subject:
            lost.append(ack[0])
            if between is not None:
                await between()
            raise nats.errors.TimeoutError
        return ack

    monkeypatch.setattr(direct, "publish_acked", publish)
    return lost


async def test_a_lost_ack_is_resolved_by_finding_our_own_message(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    run_id = await _run(world)
    lost = _lose_acks(world, 1, monkeypatch)
    events = await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {"stepName": "a"})])
    assert lost and [e.seq for e in events] == [3]
    other = await open_nats_world()
    listed = await other.list_events(run_id)
    assert [(e.seq, e.type) for e in listed] == [
        (1, T.RUN_CREATED),
        (2, T.RUN_STARTED),
        (3, T.STEP_CREATED),
    ]  # written exactly once
    assert listed[2].created_at == events[0].created_at


async def test_a_lost_ack_then_another_writer_still_counts_as_ours(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    other = await open_nats_world()
    run_id = await _run(world)
    await other.list_events(run_id)

    async def meanwhile() -> None:
        await other.append(run_id, [NewEvent(T.WAIT_CREATED, "w1", {"resumeAt": 1.0})])

    _lose_acks(world, 1, monkeypatch, between=meanwhile)
    events = await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})])
    assert [e.seq for e in events] == [3]
    listed = await other.list_events(run_id)
    assert [(e.seq, e.correlation_id) for e in listed[2:]] == [(3, "s1"), (4, "w1")]


async def test_stale_projection_catches_up_and_fences(open_nats_world: OpenWorlds) -> None:
    a = await open_nats_world()
    b = await open_nats_world()
    run_id = await _run(a)
    await b.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})])  # a has not seen seq 3
    with pytest.raises(SequenceConflictError) as info:
        await a.append(run_id, [NewEvent(T.STEP_CREATED, "s2", {})], expected_seq=2)
    assert info.value.details["last_seq"] == 3
    # no expected_seq: a catches up (the server refused its stale expectation) and appends
    events = await a.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 1})])
    assert [e.seq for e in events] == [4]
    # a validation error seen on a stale projection is confirmed against the server first
    await b.append(run_id, [NewEvent(T.STEP_CREATED, "s3", {})])
    events = await a.append(run_id, [NewEvent(T.STEP_STARTED, "s3", {"attempt": 1})])
    assert [e.seq for e in events] == [6]
    info_a, info_b = await a.get_run(run_id), await b.get_run(run_id)
    assert info_a == info_b and info_a is not None and info_a.last_seq == 6


async def test_created_at_is_the_servers_stored_timestamp(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    run_id = await _run(world)
    [event] = await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})])
    raw = await world._log._js.get_last_msg(
        world.names.events_stream, world.names.run_subject(run_id)
    )
    assert abs(raw.time.timestamp() - event.created_at) < 1e-5


async def test_list_runs_reads_summaries_and_matches_get_run(open_nats_world: OpenWorlds) -> None:
    writer = await open_nats_world()
    ids = [await _run(writer, "orders") for _ in range(3)]
    await writer.append(ids[1], [NewEvent(T.RUN_FAILED, data={"error": {"message": "x"}})])
    reader = await open_nats_world()  # no projection in this process
    runs = await reader.list_runs()
    assert [r.run_id for r in runs] == list(reversed(ids))
    for info in runs:
        assert info == await writer.get_run(info.run_id)
    assert [r.run_id for r in await reader.list_runs(status=RunStatus.FAILED)] == [ids[1]]
    assert [r.run_id for r in await reader.list_runs(workflow="orders", limit=2)] == [
        ids[2],
        ids[1],
    ]
    assert await reader.list_runs(workflow="nope") == []


async def test_run_ids_that_are_not_subject_tokens(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    run_id = "run with.dots*and spaces>"
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "odd"})])
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    assert [e.seq for e in await world.list_events(run_id)] == [1, 2]
    other = await open_nats_world()
    info = await other.get_run(run_id)
    assert info is not None and info.status is RunStatus.RUNNING
    assert [r.run_id for r in await other.list_runs(workflow="odd")] == [run_id]


async def _stale_claim(world: Any, token: str, run_id: str, cid: str) -> None:
    hooks = world._log.claims._hooks
    at = (await world._log._fresh(run_id)).stream_seq  # where its append would have landed
    value = {"token": token, "run": run_id, "cid": cid, "active": True, "at": at}
    await hooks.put(kv_key(token), json.dumps(value).encode())


async def test_a_token_claim_that_never_reached_the_log(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that claimed a token and died before its append must not hold it forever."""
    world = await open_nats_world()
    crashed = await _run(world)
    await _stale_claim(world, "approve:1", crashed, "h9")
    run_id = await _run(world)
    new_hook = [NewEvent(T.HOOK_CREATED, "h1", {"token": "approve:1"})]
    with pytest.raises(HookTokenConflictError):  # young claim: it may still be appending
        await world.append(run_id, new_hook)
    assert await world.get_hook("approve:1") is None
    monkeypatch.setattr(hook_claims, "_CLAIM_GRACE", 0.0)
    await world.append(run_id, new_hook)
    hook = await world.get_hook("approve:1")
    assert hook is not None and (hook.run_id, hook.correlation_id, hook.active) == (
        run_id,
        "h1",
        True,
    )


async def test_a_lost_token_release_is_repaired_from_the_log(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    done = await _run(world)
    await world.append(done, [NewEvent(T.HOOK_CREATED, "h1", {"token": "tok"})])
    await world.append(done, [NewEvent(T.RUN_CANCELLED, data={"reason": "x"})])
    await _stale_claim(world, "tok", done, "h1")  # as if the release after the append was lost
    hook = await world.get_hook("tok")
    assert hook is not None and not hook.active
    other = await _run(world)
    await world.append(other, [NewEvent(T.HOOK_CREATED, "h1", {"token": "tok"})])
    hook = await world.get_hook("tok")
    assert hook is not None and hook.run_id == other and hook.active


async def test_hook_disposed_releases_the_token(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    a, b = await _run(world), await _run(world)
    await world.append(a, [NewEvent(T.HOOK_CREATED, "h1", {"token": "t"})])
    await world.append(a, [NewEvent(T.HOOK_DISPOSED, "h1", {})])
    old = await world.get_hook("t")
    assert old is not None and not old.active and old.run_id == a
    await world.append(b, [NewEvent(T.HOOK_CREATED, "h2", {"token": "t"})])
    with pytest.raises(HookTokenConflictError):
        await world.append(a, [NewEvent(T.HOOK_CREATED, "h3", {"token": "t"})])


async def test_a_projection_ahead_of_the_server_is_rebuilt(open_nats_world: OpenWorlds) -> None:
    """Messages removed behind the world's back (by an operator) must not wedge appends."""
    world = await open_nats_world()
    run_id = await _run(world)
    await world.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {})])
    js = world._log._js
    last = await js.get_last_msg(world.names.events_stream, world.names.run_subject(run_id))
    await js.delete_msg(world.names.events_stream, last.seq)
    events = await world.append(run_id, [NewEvent(T.STEP_CREATED, "s2", {})])
    assert [e.seq for e in events] == [3]
    assert [e.correlation_id for e in await world.list_events(run_id)] == [None, None, "s2"]


async def test_a_run_deleted_elsewhere_vanishes_from_every_projection(
    open_nats_world: OpenWorlds,
) -> None:
    a = await open_nats_world()
    b = await open_nats_world()
    run_id = await _run(a)
    await a.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    assert (await b.get_run(run_id)) is not None  # b holds a projection now
    mid = await a.enqueue("flow", {"runId": run_id}, idempotency_key=f"wake:{run_id}")
    assert await b.delete_runs(older_than=0) == 1
    assert await a.get_run(run_id) is None and await a.list_events(run_id) == []
    assert await a.list_runs() == []
    # its queued wake went with it, and released its key
    assert await a.receive("flow", wait_seconds=0.2) == []
    assert await a.enqueue("flow", {"runId": "x"}, idempotency_key=f"wake:{run_id}") != mid
    with pytest.raises(RunNotFoundError):
        await a.append(run_id, [NewEvent(T.RUN_STARTED)])


async def test_archive_keeps_bodies_and_server_stamps(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    run_id = await _run(world)
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    stamps = [e.created_at for e in await world.list_events(run_id)]
    assert await world.archive_runs(older_than=0) == 1
    assert await world.archive_runs(older_than=0) == 0 and await world.archived_count() == 1
    found = await direct.read_subject(
        world._nc,
        world.names.archive_stream,
        world.names.archive_subject(run_id),
        0,
        timeout=5,
        url="test",
    )
    # the run's one chunk, then the index that names it (first event, last event, sequence)
    record, index = (json.loads(m.data) for m in found)
    assert record["runId"] == run_id and len(record["messages"]) == 3
    assert index == {"runId": run_id, "index": [[1, 3, found[0].seq]]}
    from wayline.worlds.nats.codec import parse_stamp

    assert [parse_stamp(m["time"]) for m in record["messages"]] == pytest.approx(stamps)


async def test_reads_share_one_reply_subscription_and_get_their_own_answers(
    open_nats_world: OpenWorlds,
) -> None:
    """Direct gets reply on subjects below one wildcard subscription per connection: many
    concurrent reads, each gets only its own run's events, and no subscription is left."""
    import asyncio

    world = await open_nats_world()
    reader = await open_nats_world()  # a cold projection: every read goes to the server
    runs = [await _run(world, workflow=f"wf{i}") for i in range(20)]
    nc = reader._nc
    await reader.list_events(runs[0])
    subs_before = len(nc._subs)
    logs = await asyncio.gather(*(reader.list_events(r) for r in runs))
    for run_id, events in zip(runs, logs, strict=True):
        assert [e.type for e in events] == [T.RUN_CREATED, T.RUN_STARTED]
        assert {e.run_id for e in events} == {run_id}
    infos = await asyncio.gather(*(reader.get_run(r) for r in runs))
    assert [i.workflow for i in infos if i is not None] == [f"wf{i}" for i in range(20)]
    assert len(nc._subs) == subs_before


async def test_an_archive_written_before_its_index_still_pages(open_nats_world: OpenWorlds) -> None:
    """An archive written before the index (issue #37) holds a run's chunks alone, 256 KiB of
    its log's messages each, with nothing after them: its pages are read whole and sliced, as
    they were, and agree with the run's log."""
    world = await open_nats_world()
    run_id = await _run(world, workflow="old_archive.flow")
    for start in range(0, 2400, 100):
        await world.append(
            run_id,
            [
                NewEvent(T.STEP_CREATED, f"old-{i}", {"name": "s"})
                for i in range(start, start + 100)
            ],
        )
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 1})])
    names = world.names
    log = await direct.read_subject(
        world._nc, names.events_stream, names.run_subject(run_id), 0, timeout=5, url="test"
    )
    # the bytes the archive wrote before the index: {"runId", "part", "messages"} chunks of
    # 256 KiB of bodies, each copy the log's message body with its seq and server time
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for msg in log:
        if size > 256 * 1024 and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(
            {"seq": msg.seq, "time": msg.headers["Nats-Time-Stamp"], "body": json.loads(msg.data)}
        )
        size += len(msg.data)
    js = world._log._js
    for i, chunk in enumerate(chunks):
        body = json.dumps({"runId": run_id, "part": i, "messages": chunk}, separators=(",", ":"))
        await js.publish(
            names.archive_subject(run_id),
            body.encode(),
            headers={"Nats-Msg-Id": f"ar-{run_id}-{i}-{chunk[0]['seq']}"},
        )
    expected = await world.list_events(run_id)
    await js.purge_stream(names.events_stream, subject=names.run_subject(run_id))
    reader = await open_nats_world()
    assert await reader.get_run(run_id) is None
    seen = []
    after = 0
    while after < len(expected):
        found = await reader.archived_page(run_id, after, 100)
        assert found is not None
        last, page = found
        assert last == len(expected) == 2403 and len(page) == min(100, last - after)
        seen += page
        after = page[-1].seq
    assert [(e.seq, e.type, e.correlation_id, e.data) for e in seen] == [
        (e.seq, e.type, e.correlation_id, e.data) for e in expected
    ]
    assert await reader.archived_page(run_id, 2403, 100) == (2403, [])


@pytest.mark.parametrize(
    "rows",
    [
        "[[1, 2503, Infinity]]",  # json reads it: a float no int holds
        "[[1, 2503, 1e400]]",
        "[[1, 2503, -1]]",  # a stream sequence the server refuses to look up
        "[[1, 2503, 18446744073709551616]]",
        "[[1, 2503, true]]",
        "[[-5, 2503, 1]]",  # events the log never numbers
        "[[1, 2503, 1], [1, 2503, 1], [1, 2503, 1]]",  # overlapping: one chunk read thrice
        "[[1, 1002, 1], [1004, 2503, 2]]",  # gapped
    ],
)
async def test_a_hostile_archive_index_is_a_corrupt_log(
    open_nats_world: OpenWorlds, rows: str
) -> None:
    """Anyone can publish on a run's archive subject: an index message that does not name the
    run's events from 1 on, each once, in distinct chunks stored before it, is the archive's
    copy not reading (``CorruptLogError``, a ``409 CORRUPT_LOG``), found before any chunk is
    read: never an ``OverflowError`` (a 500), the server's refusal of a sequence it cannot
    hold (``WorldError``), nor a page served from it."""
    from tests.archived_runs import long_archived_run
    from wayline.errors import CorruptLogError

    world = await open_nats_world()
    run_id = await long_archived_run(world, 2500, "hostile_index")
    body = f'{{"runId":"{run_id}","index":{rows}}}'
    await world._log._js.publish(world.names.archive_subject(run_id), body.encode())
    reader = await open_nats_world()
    with pytest.raises(CorruptLogError, match="index"):
        await reader.archived_page(run_id, 0, 100)
