"""A start message sent right after its run was created carries where the sender's view of
the run's log ends (``logMark``, ``World.log_mark``); a worker on the same world drives the
run from that view without reading it. These tests write to the run between the start and
its delivery, from another connection and from the same one, and send marks that are not
marks: every run still ends as its log says, and nothing is set aside (real nats-server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.serde import encode
from wayline._engine.ending import terminal
from wayline.world import FLOW_TOPIC, HookInfo
from wayline.worlds.nats import eventlog, run_cache

ran: list[str] = []


@wayline.step(name="marks.touch")
async def touch(tag: str) -> str:
    ran.append(tag)
    return tag


@wayline.workflow(name="marks.flow")
async def flow(tag: str) -> str:
    await touch(tag)
    return tag


async def _ended(client: wayline.Client, run_id: str) -> RunStatus:
    for _ in range(600):
        info = await client.get_run(run_id)
        if info.status.terminal:
            return info.status
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


async def test_a_cancel_from_another_process_after_the_mark_is_not_missed(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run is cancelled from another connection after its start message (with the mark)
    was sent and before the worker took it. This world hears of the append and stops taking
    its view for current; and when it has not heard yet (the republish still on its way,
    played here by forgetting it), the worker's first write is refused against the log's
    end: either way the run is cancelled with no step run."""
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 60.0)  # the worker's start may be slow here
    for heard in (True, False):
        ran.clear()
        world, other = await open_nats_world(), await open_nats_world()
        client = wayline.Client(world)
        handle = await client.start(flow, "a")
        assert world.log_mark(handle.run_id) is not None
        assert await wayline.Client(other).cancel(handle.run_id)
        for _ in range(100):  # the cancel's republish reaches this world
            if world.log_mark(handle.run_id) is None:
                break
            await asyncio.sleep(0.02)
        assert world.log_mark(handle.run_id) is None
        if not heard:
            assert world._log is not None
            st = world._log._runs[handle.run_id]
            st.heard = st.stream_seq
            assert world.log_mark(handle.run_id) is not None
        async with wayline.Worker(world, [flow]):
            assert await _ended(client, handle.run_id) is RunStatus.CANCELLED
            await asyncio.sleep(0.5)  # a body started by mistake would have run by now
        assert ran == []
        assert await world.list_dead_letters() == []


async def test_a_write_by_the_same_world_after_the_mark_moves_the_view(
    open_nats_world: OpenWorlds,
) -> None:
    """The same world writes to the run after the start message: its view no longer ends at
    the message's mark, so the worker reads, and the run is cancelled with no step run."""
    ran.clear()
    world = await open_nats_world()
    client = wayline.Client(world)
    handle = await client.start(flow, "b")
    mark = world.log_mark(handle.run_id)
    assert await client.cancel(handle.run_id)
    assert world.log_mark(handle.run_id) not in (None, mark)
    async with wayline.Worker(world, [flow]):
        assert await _ended(client, handle.run_id) is RunStatus.CANCELLED
        await asyncio.sleep(0.5)
    assert ran == []


async def test_marks_that_are_not_marks_are_passed_over(open_nats_world: OpenWorlds) -> None:
    """Flow messages whose ``logMark`` is not a string, is empty, is too long or names no
    view: each is a flow message like any other (the run is read and driven once), none is
    set aside as malformed."""
    ran.clear()
    world, starter = await open_nats_world(), await open_nats_world()
    handle = await wayline.Client(starter).start(flow, "c")  # the worker's world holds no view
    for junk in (7, None, "", "x" * 65, {"a": 1}, ["m"], "0" * 32):
        await world.enqueue(FLOW_TOPIC, {"runId": handle.run_id, "reason": "x", "logMark": junk})
    async with wayline.Worker(world, [flow]):
        assert await handle.result(timeout=60) == "c"
        await asyncio.sleep(0.5)  # the junk messages after the end are acked as late
    assert ran == ["c"]
    assert await world.list_dead_letters() == []


async def test_a_child_started_beside_its_parent_ends_as_its_log_says(
    open_nats_world: OpenWorlds,
) -> None:
    """A child's start message carries its parent's worker's mark: the child is driven from
    that view, and its result reaches the parent."""
    ran.clear()
    world = await open_nats_world()
    async with wayline.Worker(world, [flow, parent]):
        handle = await wayline.Client(world).start(parent)
        assert await handle.result(timeout=60) == ["p0", "p1"]
    assert sorted(ran) == ["p0", "p1"]


@wayline.workflow(name="marks.parent")
async def parent() -> list[str]:
    return [await wayline.child(flow, f"p{i}") for i in range(2)]


# --- writes this process heard of after the mark (found by a review of the first version) --


@wayline.workflow(name="marks.kid")
async def kid(tag: str) -> str:
    return await wayline.create_hook(f"k-{tag}")


@wayline.workflow(name="marks.waits_for_both")
async def waits_for_both(tag: str) -> list[str]:
    hook = wayline.create_hook(f"p-{tag}")
    return await wayline.gather(wayline.child(kid, tag), hook)


@wayline.workflow(name="marks.waits_for_kid")
async def waits_for_kid(tag: str) -> str:
    return await wayline.child(kid, tag)


async def _hook(world: wayline.World, token: str) -> HookInfo:
    for _ in range(400):
        found = await world.get_hook(token)
        if found is not None and found.active:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no hook {token}")


async def _kid_ends(world: wayline.World, kid_run: str) -> None:
    """The kid ends with no worker up: its report to the parent is appended and the
    parent's wake (with a mark) stays stored."""
    output = {"output": encode("k", what="k")}
    await terminal(world, kid_run, NewEvent(EventType.RUN_COMPLETED, data=output))


async def _parent_waiting_on_hook_with_stored_wake(a: wayline.World) -> tuple[Any, HookInfo]:
    """A parent waiting on its hook and its child; the child ends with no worker up, and its
    report's wake to the parent (with a mark) stays stored."""
    tag = uuid.uuid4().hex[:8]
    async with wayline.Worker(a, [waits_for_both, kid]):
        handle = await wayline.Client(a).start(waits_for_both, tag)
        kid_hook = await _hook(a, f"k-{tag}")
        parent_hook = await _hook(a, f"p-{tag}")
        await asyncio.sleep(0.3)
    await _kid_ends(a, kid_hook.run_id)
    assert a.log_mark(handle.run_id) is not None
    return handle, parent_hook


async def _payload_whose_wake_is_lost(b: wayline.World, run_id: str, hook: HookInfo) -> None:
    """Another process appends the parent's hook payload and dies before its wake; a
    recovery pass elsewhere leaves the run to its stored wake."""
    payload = {"payload": encode("h", what="h")}
    await b.append(run_id, [NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, payload)])


async def _left_to_its_wake(open_nats_world: OpenWorlds) -> None:
    counts = await wayline.Worker(await open_nats_world(), [waits_for_both, kid]).recover_runs()
    assert counts["rearmed"] == 0, counts


def _drop_republishes(world: Any, subject: str) -> Callable[[], None]:
    """Drop this world's republishes (stamps) of ``subject``'s appends, as a core NATS message
    lost on a route between cluster servers would be (nothing on this client says so).
    Returns the undo."""
    handoff = world._log._stamp_sub._pending_queue
    real = handoff._handler
    token = subject.rpartition(".")[2]

    def handler(msg: Any) -> None:
        if msg.subject.rpartition(".")[2] != token:
            real(msg)

    handoff._handler = handler
    return lambda: setattr(handoff, "_handler", real)


async def test_a_stored_wake_sees_a_write_another_process_made_after_it_was_sent(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored wake must see the payload: this world heard the other process's append, so
    its view is no longer taken for current (however recent). The first version drove the
    wake from the view and acked it: the parent waited on its hook for good."""
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 60.0)
    a, b = await open_nats_world(), await open_nats_world()
    handle, parent_hook = await _parent_waiting_on_hook_with_stored_wake(a)
    await _payload_whose_wake_is_lost(b, handle.run_id, parent_hook)
    for _ in range(100):
        if a.log_mark(handle.run_id) is None:
            break
        await asyncio.sleep(0.02)
    assert a.log_mark(handle.run_id) is None  # heard
    await _left_to_its_wake(open_nats_world)
    async with wayline.Worker(a, [waits_for_both, kid], recover=False):
        assert await handle.result(timeout=30) == ["k", "h"]


async def test_a_stored_wake_sees_a_write_whose_republish_was_lost(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the other process's republish never reaches this world (core NATS is at
    most once): the view is taken for current only briefly after it was proved, so the wake,
    delivered later, reads."""
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 0.5)
    a, b = await open_nats_world(), await open_nats_world()
    handle, parent_hook = await _parent_waiting_on_hook_with_stored_wake(a)
    assert a._log is not None
    undo = _drop_republishes(a, a._log._runs[handle.run_id].subject)
    try:
        await _payload_whose_wake_is_lost(b, handle.run_id, parent_hook)
        await asyncio.sleep(0.6)
        await _left_to_its_wake(open_nats_world)
        async with wayline.Worker(a, [waits_for_both, kid], recover=False):
            assert await handle.result(timeout=30) == ["k", "h"]
    finally:
        undo()


async def test_a_run_watcher_that_raises_does_not_stop_the_hearing(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``watch_runs`` callback that raises (a user's bug) is logged; the world still hears
    every append, so the stored wake still reads. It was called first, and its exception
    skipped the rest: the view stayed current and the parent waited for good."""
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 60.0)
    a, b = await open_nats_world(), await open_nats_world()
    handle, parent_hook = await _parent_waiting_on_hook_with_stored_wake(a)

    def boom(run_id: str) -> None:
        raise RuntimeError("a watcher's bug")

    watch = await a.watch_runs(boom)
    assert watch is not None
    try:
        await _payload_whose_wake_is_lost(b, handle.run_id, parent_hook)
        await asyncio.sleep(0.3)
        async with wayline.Worker(a, [waits_for_both, kid], recover=False):
            assert await handle.result(timeout=30) == ["k", "h"]
    finally:
        await watch.close()


async def test_a_world_whose_read_run_predates_marks_still_drives_marked_runs(
    open_nats_world: OpenWorlds, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrapper whose ``read_run`` takes the run id alone (written before marks): a marked
    start is driven on its first delivery, with no crash."""
    world = await open_nats_world()
    real = world.read_run

    async def read_run(run_id: str) -> Any:
        return await real(run_id)

    world.read_run = read_run  # type: ignore[method-assign]
    async with wayline.Worker(world, [flow]):
        handle = await wayline.Client(world).start(flow, "w")
        assert await handle.result(timeout=30) == "w"
    assert not [r for r in caplog.records if r.exc_info], caplog.text


async def test_a_run_id_used_again_is_driven_with_its_own_input(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start (with this world's mark) is still stored when another process terminates the
    run, deletes its log and starts it again under its id (the keyed start is the stored
    one). The worker must drive the new run, not this world's view of the old one."""
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 60.0)
    a, b = await open_nats_world(), await open_nats_world()
    run_id = new_run_id()
    await wayline.Client(a).start_with(wayline.StartOptions(run_id=run_id), flow, "old")
    other = wayline.Client(b)
    assert await other.terminate(run_id)
    # a cleanup's purge of the run's log, cut short before it removed the run's messages
    assert b._log is not None
    await b._log._js.purge_stream(b.names.events_stream, subject=b.names.run_subject(run_id))
    b._log._runs.pop(run_id, None)
    handle = await other.start_with(wayline.StartOptions(run_id=run_id), flow, "new")
    async with wayline.Worker(a, [flow], recover=False):
        assert await handle.result(timeout=30) == "new"


async def test_a_mark_names_a_view_that_holds_the_senders_own_append(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's view is evicted from the cache while the kid's report is appended, and
    read again before that append lands: the view in the cache then lacks the report, and no
    mark may name it."""
    a = await open_nats_world()
    tag = uuid.uuid4().hex[:8]
    async with wayline.Worker(a, [waits_for_kid, kid]):
        handle = await wayline.Client(a).start(waits_for_kid, tag)
        kid_hook = await _hook(a, f"k-{tag}")
        await asyncio.sleep(0.3)
    log = a._log
    assert log is not None
    monkeypatch.setattr(run_cache, "CACHE_RUNS", 2)
    monkeypatch.setattr(eventlog, "_CURRENT_FOR", 60.0)
    real_publish = log._publish
    before: list[str] = []

    async def publish(st: Any, plan: Any, msg_id: str) -> Any:
        if st.run_id == handle.run_id and not before:
            for other in [new_run_id() for _ in range(3)]:  # evict the parent's view
                await a.get_run(other)
            await a.get_run(handle.run_id)  # and read it again, before the report lands
            before.append(log._runs[handle.run_id].last_id)
        return await real_publish(st, plan, msg_id)

    monkeypatch.setattr(log, "_publish", publish)
    await _kid_ends(a, kid_hook.run_id)
    monkeypatch.setattr(log, "_publish", real_publish)
    assert before
    mark = a.log_mark(handle.run_id)
    if mark is not None:
        held = log.view_at(handle.run_id, mark)
        assert held is not None
        assert EventType.CHILD_COMPLETED in [e.type for e in held[1]]
    async with wayline.Worker(a, [waits_for_kid, kid], recover=False):
        assert await handle.result(timeout=30) == "k"
