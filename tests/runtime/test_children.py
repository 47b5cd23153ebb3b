"""Child runs (seed 004): owned by their parent, claimed before the wait, resumed on replay,
deadlines from the child's creation, never recovered behind the parent's back."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import render_show
from wayline.world import FLOW_TOPIC

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"

KIDS = [flows.kid, flows.kid_fails, flows.kid_waits]


async def test_parent_gets_child_results_and_failures(engine: Engine) -> None:
    async with engine.worker([flows.parent, *KIDS]):
        handle = await engine.client.start(flows.parent, 5)
        assert await handle.result(timeout=15) == [105, "child failed: failed"]
    created = of_type(await handle.events(), EventType.CHILD_CREATED)
    assert len(created) == 2
    child = await engine.client.get_run(created[0].data["childRunId"])
    assert child.workflow == "kid" and child.attributes["parent"]["runId"] == handle.run_id
    shown = io.StringIO()
    render_show(child, await engine.client.handle(child.run_id).events(), shown)
    claim = child.attributes["parent"]["cid"]
    assert f"parent    {handle.run_id} (as its child {claim})" in shown.getvalue()


async def test_a_parent_replay_resumes_the_existing_child(engine: Engine) -> None:
    async with engine.worker([flows.parent_waits, *KIDS]):
        handle = await engine.client.start(flows.parent_waits, "kid-tok-1")
        await wait_for(lambda: engine.world.get_hook("kid-tok-1"))
        for _ in range(3):  # unrelated wakes replay the parent
            await engine.world.enqueue(FLOW_TOPIC, {"runId": handle.run_id, "reason": "wake"})
        await engine.client.resume_hook("kid-tok-1", {"ok": 1})
        assert await handle.result(timeout=15) == {"ok": 1}
    assert len(await engine.world.list_runs(workflow="kid_waits")) == 1


async def test_a_claimed_child_that_was_never_created_is_created_on_redelivery(
    engine: Engine,
) -> None:
    """The crash window between the parent's claim and the child's run_created."""
    world = engine.world
    original = world.append
    failed = []

    async def flaky_append(run_id, events, *, expected_seq=None):  # type: ignore[no-untyped-def]
        if events[0].type is EventType.RUN_CREATED and events[0].data.get("parent") and not failed:
            failed.append(run_id)
            raise wayline.WorldUnavailableError("simulated crash before the child was created")
        return await original(run_id, events, expected_seq=expected_seq)

    world.append = flaky_append  # type: ignore[method-assign]
    async with engine.worker([flows.parent, *KIDS]):
        handle = await engine.client.start(flows.parent, 1)
        assert await handle.result(timeout=20) == [101, "child failed: failed"]
    assert failed
    assert len(await world.list_runs(workflow="kid")) == 1


async def test_child_deadline_can_be_caught_and_the_child_keeps_running(engine: Engine) -> None:
    async with engine.worker([flows.parent_deadline, *KIDS]):
        handle = await engine.client.start(flows.parent_deadline, "late-1", True)
        assert await handle.result(timeout=15) == "timed out"
        [kid] = await engine.world.list_runs(workflow="kid_waits")
        assert not kid.status.terminal  # not cancelled
        await engine.client.resume_hook("late-1", "answer")
        assert await engine.client.handle(kid.run_id).result(timeout=10) == "answer"
    events = await handle.events()
    [created] = of_type(events, EventType.CHILD_CREATED)
    [deadline] = of_type(events, EventType.WAIT_CREATED)
    assert deadline.data["resumeAt"] == pytest.approx(created.data["deadline"])


async def test_uncaught_deadline_parks_the_parent_until_the_child_settles(engine: Engine) -> None:
    async with engine.worker([flows.parent_deadline, *KIDS]):
        handle = await engine.client.start(flows.parent_deadline, "late-2", False)

        async def stuck() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck)
        await engine.client.resume_hook("late-2", "finally")
        [kid] = await engine.world.list_runs(workflow="kid_waits")
        assert await engine.client.handle(kid.run_id).result(timeout=10) == "finally"
        await engine.client.resume_compensation(handle.run_id)
        with pytest.raises(wayline.RunFailedError, match="deadline"):
            await handle.result(timeout=10)


async def test_recovery_leaves_children_to_their_parent_and_drives_orphans(engine: Engine) -> None:
    async with engine.worker([flows.parent_waits, *KIDS], recover=False):
        handle = await engine.client.start(flows.parent_waits, "kid-tok-2")
        await wait_for(lambda: engine.world.get_hook("kid-tok-2"))
    worker = wayline.Worker(engine.world, [flows.parent_waits, *KIDS])
    counts = await worker.recover_runs()
    assert counts == {
        "running": 0,
        "waiting": 1,
        "compensating": 0,
        "orphans": 0,
        "total": 1,
        "rearmed": 0,  # idle: its live child brings its wake
    }
    # an orphan: a child whose parent vanished
    from wayline._core.events import NewEvent
    from wayline._core.ids import new_run_id

    orphan = new_run_id()
    await engine.world.append(
        orphan,
        [
            NewEvent(
                EventType.RUN_CREATED,
                data={
                    "workflow": "kid",
                    "input": {"args": [1]},
                    "parent": {"runId": new_run_id(), "cid": "c1"},
                },
            )
        ],
    )
    counts = await worker.recover_runs()
    assert counts["orphans"] == 1 and counts["total"] == 2
    assert counts["rearmed"] == 1  # the orphan
    async with engine.worker([flows.parent_waits, *KIDS]):
        assert await engine.client.handle(orphan).result(timeout=10) == 101
        await engine.client.resume_hook("kid-tok-2", 7)
        assert await handle.result(timeout=10) == 7


# --- a cancel reaches the children ------------------------------------------------------------
@wayline.workflow
async def booked_child(path: str) -> str:
    await flows.charge_card(path, "kid")
    await wayline.sleep(3600)
    return "woke"


@wayline.workflow
async def booking_parent(path: str) -> str:
    await flows.reserve(path, "parent")
    return await wayline.child(booked_child, path)


async def test_cancelling_a_parent_cancels_its_running_child_then_unwinds_itself(
    engine: Engine, tmp_path: Path
) -> None:
    """The parent was parked ``compensation_stuck`` on ``CHILD_RUNNING`` while the child slept
    on, uncancelled, for its hour. Now the cancel reaches the child, which unwinds on its own
    (its refund), and the child's end wakes the parent, which then releases its own step and
    ends cancelled: each compensation once, the child's before the parent's."""
    path = str(tmp_path / "ledger")
    async with engine.worker([booking_parent, booked_child]):
        parent = await engine.client.start(booking_parent, path)

        async def kid() -> str | None:
            created = of_type(await parent.events(), EventType.CHILD_CREATED)
            if not created:
                return None
            run_id = str(created[0].data["childRunId"])
            return run_id if "charge kid" in " ".join(flows.lines(path)) else None

        kid_id = await wait_for(kid, timeout=20)
        assert await engine.client.cancel(parent.run_id, "changed my mind")
        with pytest.raises(wayline.RunCancelledError):
            await parent.result(timeout=30)
        with pytest.raises(wayline.RunCancelledError):
            await engine.client.handle(kid_id).result(timeout=5)
    child = await engine.client.get_run(kid_id)
    assert child.status is wayline.RunStatus.CANCELLED
    assert parent.run_id in str(child.error) and "changed my mind" in str(child.error)
    marks = [line.split(" key=")[0] for line in flows.lines(path)]
    assert marks == ["reserve parent", "charge kid", "refund kid", "release parent"], marks
    info = await engine.client.get_run(parent.run_id)
    assert info.status is wayline.RunStatus.CANCELLED
    assert not of_type(await parent.events(), EventType.RUN_COMPENSATION_STUCK)


async def test_a_child_fenced_when_its_parent_is_cancelled_is_asked_again_once_repaired(
    engine: Engine, tmp_path: Path
) -> None:
    """The parent's unwind could not ask a fenced (corrupt) child to cancel: it logged a
    warning and waited for the child's end. Once a person repaired the child, nothing asked
    again: the child ran on uncancelled (here: for its hour) and the parent sat in
    ``compensating`` behind it."""
    from tests.hostile.poison import poison_log

    path = str(tmp_path / "ledger")
    async with engine.worker([booking_parent, booked_child]):
        parent = await engine.client.start(booking_parent, path)

        async def kid() -> str | None:
            # the child asleep for its hour: its charge recorded completed and its sleep made
            # (poisoned between its charge's line and the charge's completion, the child's own
            # append would meet the bad row: a delivery set aside, not the race this is about)
            created = of_type(await parent.events(), EventType.CHILD_CREATED)
            if not created or "charge kid" not in " ".join(flows.lines(path)):
                return None
            kid_id = str(created[0].data["childRunId"])
            asleep = of_type(await engine.client.handle(kid_id).events(), EventType.WAIT_CREATED)
            return kid_id if asleep else None

        kid_id = await wait_for(kid, timeout=20)
        seq = await poison_log(engine.world, kid_id, b"{not json")
        assert await engine.client.cancel(parent.run_id, "changed my mind")

        async def compensating() -> bool:
            return await parent.status() is wayline.RunStatus.COMPENSATING

        await wait_for(compensating, timeout=20)
        await engine.client.repair_run(kid_id, seq)
        with pytest.raises(wayline.RunCancelledError):
            await engine.client.handle(kid_id).result(timeout=15)
        with pytest.raises(wayline.RunCancelledError):
            await parent.result(timeout=15)


async def test_a_cancel_reaches_the_child_a_stuck_unwind_waits_for(engine: Engine) -> None:
    """The parent's failure unwind is parked on its running child (an uncaught deadline); a
    cancel then asks the child to stop too (it ran on, and ``cancel`` returned True for
    nothing). The parent still waits for a person, as a stuck unwind does."""
    async with engine.worker([flows.parent_deadline, *KIDS]):
        handle = await engine.client.start(flows.parent_deadline, "late-3", False)

        async def stuck() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck)
        [kid] = await engine.world.list_runs(workflow="kid_waits")
        assert await engine.client.cancel(handle.run_id, "no longer needed")
        with pytest.raises(wayline.RunCancelledError):
            await engine.client.handle(kid.run_id).result(timeout=15)
        assert await handle.status() is wayline.RunStatus.COMPENSATION_STUCK
        await engine.client.resume_compensation(handle.run_id)
        with pytest.raises(wayline.WaylineError):
            await handle.result(timeout=15)
    child = await engine.client.get_run(kid.run_id)
    assert "no longer needed" in str(child.error)


async def test_abandoning_a_cancelled_stuck_unwind_ends_it_whatever_its_child_does(
    engine: Engine, tmp_path: Path
) -> None:
    """The parent's unwind is parked on its running child (an uncaught deadline); a cancel is
    passed on to the child, whose own unwind then parks (its compensation fails). A person
    abandons the parent's unwind: it ends. It sat ``compensation_stuck`` instead, each of its
    deliveries asking the child to cancel again and leaving before the abandon was looked at,
    as long as the child did not end."""
    path = str(tmp_path / "ledger")
    (tmp_path / flows.STUCK_FLAG).touch()
    stuck = wayline.RunStatus.COMPENSATION_STUCK
    async with engine.worker([flows.parent_deadline_stuck, flows.kid_unwinds_stuck]):
        handle = await engine.client.start(flows.parent_deadline_stuck, path, "late-4")

        async def parent_stuck() -> bool:
            return await handle.status() is stuck

        await wait_for(parent_stuck, timeout=20)
        [kid] = await engine.world.list_runs(workflow="kid_unwinds_stuck")
        assert await engine.client.cancel(handle.run_id, "no longer needed")

        async def kid_stuck() -> bool:
            return await engine.client.handle(kid.run_id).status() is stuck

        await wait_for(kid_stuck, timeout=20)
        await engine.client.abandon_compensation(handle.run_id)
        with pytest.raises(wayline.WaylineError, match="abandoned"):
            await handle.result(timeout=15)
        assert await engine.client.handle(kid.run_id).status() is stuck


@wayline.workflow
async def grandparent_waits(token: str) -> object:
    return await wayline.child(flows.parent_waits, token)


@pytest.mark.parametrize("how", ["terminate", "fail"])
async def test_a_parent_ended_by_request_terminates_its_running_children(
    engine: Engine, how: str
) -> None:
    """``runs terminate`` / ``runs fail`` of a parent end its children still running too,
    and theirs (as Temporal's default parent-close policy): nobody else would stop them, and
    the tokens their hooks hold are free again. Before, the child waited on its hook for good."""
    token = f"tok-{how}-{uuid.uuid4().hex[:8]}"
    async with engine.worker([grandparent_waits, flows.parent_waits, flows.kid_waits]):
        top = await engine.client.start(grandparent_waits, token)
        await wait_for(lambda: engine.world.get_hook(token))
        runs = {r.workflow: r for r in await engine.client.list_runs()}
        middle, leaf = runs["parent_waits"], runs["kid_waits"]
        assert await getattr(engine.client, how)(top.run_id)
        for child in (middle, leaf):
            info = await engine.client.get_run(child.run_id)
            assert info.status is wayline.RunStatus.CANCELLED, (child.workflow, info.status)
            [end] = of_type(await engine.world.list_events(child.run_id), EventType.RUN_CANCELLED)
            assert end.data.get("terminated") is True
            assert "its parent run" in end.data["reason"]
        hook = await engine.world.get_hook(token)
        assert hook is None or not hook.active
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook(token, "late")
    assert not await getattr(engine.client, how)(top.run_id)  # ended already


@wayline.workflow
async def charging_kid(path: str, token: str) -> object:
    await flows.charge_card(path, "kid")
    return await wayline.create_hook(token)


@wayline.workflow
async def parent_of_charging_kid(path: str, token: str) -> object:
    return await wayline.child(charging_kid, path, token)


@pytest.mark.parametrize("how", ["terminate", "fail", "cancel"])
async def test_a_parent_ended_between_claiming_its_child_and_creating_it(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The window of ``_write_batch``: the parent's ``child_created`` (its claim) is in its
    log, the child's ``run_created`` (``start_child``) not yet. A parent terminated or failed
    by request there found no child run to end (``RunNotFoundError``, skipped); the worker
    then created the child, which ran with nobody to stop it: it charged, and held its hook's
    token for good. The child is terminated when it starts instead, before its body runs. A
    parent cancelled there creates the child in its unwind's delivery (``sync_children``)
    and asks it to cancel: the child ends cancelled, its charge (if any) refunded, then the
    parent."""
    from wayline._engine.handler import Handler

    path = str(tmp_path / "ledger")
    token = f"tok-window-{how}-{uuid.uuid4().hex[:8]}"
    world = engine.world
    original = world.append
    client = wayline.Client(await engine.make_world())  # its writes do not pause
    paused: list[str] = []

    async def kid_cancel_requested() -> bool:
        events = await client.world.list_events(paused[0])
        return bool(of_type(events, EventType.RUN_CANCEL_REQUESTED))

    async def append_in_window(run_id, events, *, expected_seq=None):  # type: ignore[no-untyped-def]
        parent = events[0].data.get("parent") if events[0].type is EventType.RUN_CREATED else None
        if parent and not paused:
            paused.append(run_id)
            assert await getattr(client, how)(parent["runId"])
            if how == "cancel":  # the cancel's delivery runs meanwhile, to its cancel_children
                await wait_for(kid_cancel_requested, timeout=30)
        return await original(run_id, events, expected_seq=expected_seq)

    handled: list[str] = []
    handle_flow = Handler.handle_flow

    async def spy(self: Handler, delivery: Any) -> Any:
        verdict = await handle_flow(self, delivery)
        handled.append(str(delivery.payload.get("runId")))
        return verdict

    monkeypatch.setattr(Handler, "handle_flow", spy)
    world.append = append_in_window  # type: ignore[method-assign]
    async with engine.worker([parent_of_charging_kid, charging_kid]):
        parent = await engine.client.start(parent_of_charging_kid, path, token)

        async def kid_delivered() -> bool:
            return bool(paused) and paused[0] in handled

        await wait_for(kid_delivered, timeout=30)
        kid = paused[0]
        if how == "cancel":
            with pytest.raises(wayline.RunCancelledError):
                await parent.result(timeout=40)
            with pytest.raises(wayline.RunCancelledError):
                await engine.client.handle(kid).result(timeout=10)
            reported = of_type(await parent.events(), EventType.CHILD_COMPLETED)
            assert [e.data["childRunId"] for e in reported] == [kid]
            marks = [line.split(" key=")[0] for line in flows.lines(path)]
            assert marks in ([], ["charge kid", "refund kid"]), marks
        else:
            info = await engine.client.get_run(kid)
            assert info.status is wayline.RunStatus.CANCELLED, info.status
            events = await engine.world.list_events(kid)
            assert not of_type(events, EventType.RUN_STARTED), [e.type for e in events]
            [end] = of_type(events, EventType.RUN_CANCELLED)
            assert end.data.get("terminated") is True
            assert f"its parent run {parent.run_id}" in end.data["reason"]
            assert flows.lines(path) == []  # never charged
        hook = await engine.world.get_hook(token)
        assert hook is None or not hook.active  # its token is free
    assert len(await engine.world.list_runs(workflow="charging_kid")) == 1


async def test_a_parent_failed_by_its_delivery_budget_terminates_its_running_children(
    engine: Engine,
) -> None:
    """A parent whose deliveries crash-looped past ``max_queue_deliveries`` is failed by the
    worker at once (``MAX_DELIVERIES_EXCEEDED``: no delivery of it can be trusted to drive an
    unwind). Its children still running are terminated with it, as by ``runs fail``: before,
    the child waited on its hook for good, holding the token."""
    from tests.runtime.harness import settings
    from wayline.world.routing import route_of

    token = f"tok-budget-{uuid.uuid4().hex[:8]}"
    async with engine.worker([flows.parent_waits, flows.kid_waits]):
        top = await engine.client.start(flows.parent_waits, token)
        await wait_for(lambda: engine.world.get_hook(token))
    [kid] = [r for r in await engine.client.list_runs() if r.workflow == "kid_waits"]
    # the parent's next wake crash-loops: its deliveries are spent by hand
    await engine.world.enqueue(FLOW_TOPIC, {"runId": top.run_id, "reason": "test"})
    for _ in range(3):
        [d] = await engine.world.receive(route_of(FLOW_TOPIC, flows.parent_waits), wait_seconds=5)
        await engine.world.retry(d, 0)
    tight = settings(max_queue_deliveries=3)
    async with engine.worker([flows.parent_waits, flows.kid_waits], settings=tight):
        with pytest.raises(wayline.RunFailedError) as failed:
            await top.result(timeout=20)
        assert failed.value.cause.code == "MAX_DELIVERIES_EXCEEDED"

        async def kid_ended() -> bool:
            return (await engine.client.get_run(kid.run_id)).status.terminal

        await wait_for(kid_ended)
    info = await engine.client.get_run(kid.run_id)
    assert info.status is wayline.RunStatus.CANCELLED, info.status
    [end] = of_type(await engine.world.list_events(kid.run_id), EventType.RUN_CANCELLED)
    assert end.data.get("terminated") is True
    assert end.data["reason"] == f"its parent run {top.run_id} was failed"
    hook = await engine.world.get_hook(token)
    assert hook is None or not hook.active
