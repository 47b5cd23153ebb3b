"""Per-step concurrency limits on every world: at most ``max`` bodies of a step (per key) at
once across workers, a waiting step spends no attempt and shows in its run, and a dead
holder's slot comes back after its lease."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import slot_flows as sf
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.projections import StepView
from wayline._engine import divergence, step_slots
from wayline.cli.timeline import render_show
from wayline.errors import ConfigurationError


async def test_at_most_max_bodies_across_two_workers(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    other = await engine.make_world()
    tight = settings(max_queue_deliveries=1)  # a counted hand-back would fail a flow
    async with (
        engine.worker([sf.render_one], settings=tight),
        engine.worker([sf.render_one], world=other, settings=tight),
    ):
        handles = [await engine.client.start(sf.render_one, path, f"r{i}", 0.4) for i in range(6)]
        results = [await h.result(timeout=60) for h in handles]
    assert results == [f"r{i}" for i in range(6)]
    assert sf.most_at_once(path) == 2  # the limit, and reached
    assert [sf.runs_of(path, f"r{i}") for i in range(6)] == [1] * 6
    waited = 0
    for h in handles:
        events = await h.events()
        starts = of_type(events, EventType.STEP_STARTED)
        assert [e.data["attempt"] for e in starts] == [1]  # waiting spent no attempt
        blocks = of_type(events, EventType.RUN_BLOCKED)
        for b in blocks:
            assert b.data["waitingFor"] == "concurrency"
            assert b.data["step"] == "slot_flows.render" and b.data["stepId"] == "s1"
        waited += bool(blocks)
    assert waited >= 1  # six bodies, two slots: someone waited, visibly


async def test_keys_are_limited_apart(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    held = "step:slot_flows.in_region:eu"
    assert (await engine.world.acquire_slot(held, "other:s1", 1, lease=30))[0]
    async with engine.worker([sf.regional]):
        eu = [await engine.client.start(sf.regional, path, "eu", f"e{i}") for i in range(2)]
        us = [await engine.client.start(sf.regional, path, "us", f"u{i}") for i in range(3)]
        assert [await h.result(timeout=30) for h in us] == ["u0", "u1", "u2"]  # not held up
        assert [await h.status() for h in eu] == [wayline.RunStatus.BLOCKED] * 2
        assert sf.runs_of(path, "eu/e0") == sf.runs_of(path, "eu/e1") == 0
        await engine.world.release_slot(held, "other:s1")
        assert [await h.result(timeout=30) for h in eu] == ["e0", "e1"]
    assert sf.most_at_once(path, "eu/") == 1
    assert sf.most_at_once(path, "us/") == 1


async def test_a_dead_holders_slot_frees_after_its_lease(engine: Engine, tmp_path: Path) -> None:
    """What a SIGKILLed holder leaves behind: slots under a lease nobody renews. The step
    waits visibly, starts no attempt, and runs once the leases ran out."""
    path = str(tmp_path / "marks")
    world = engine.world
    key = "step:slot_flows.render:*"
    for ghost in ("gone:s1", "gone:s2"):
        assert (await world.acquire_slot(key, ghost, 2, lease=2.5))[0]
    async with engine.worker([sf.render_one]):
        handle = await engine.client.start(sf.render_one, path, "late", 0.1)

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        info = await engine.client.get_run(handle.run_id)
        assert info.error is not None and info.error["waitingFor"] == "concurrency"
        out = io.StringIO()
        render_show(info, await handle.events(), out, "test", None)
        assert "step 'slot_flows.render' (s1) is waiting for a concurrency slot" in out.getvalue()
        assert "gone:s1, gone:s2" in out.getvalue()
        await asyncio.sleep(1.0)
        assert not of_type(await handle.events(), EventType.STEP_STARTED)  # nothing spent
        assert await handle.result(timeout=15) == "late"
    events = await handle.events()
    assert [e.data["attempt"] for e in of_type(events, EventType.STEP_STARTED)] == [1]
    assert of_type(events, EventType.RUN_UNBLOCKED)
    assert sf.runs_of(path, "late") == 1
    assert await world.acquire_slot(key, "next", 1, lease=1) == (True, ["next"])  # given back


async def test_the_world_semaphore_leases(engine: Engine) -> None:
    world = engine.world
    # a's 2 s lease, renewed after 1 s, is checked 1.2 s later: past the first lease (so held
    # only by the renewal) with 0.8 s to spare for a loaded machine (0.6/0.3/0.4 left 0.2 s)
    assert await world.acquire_slot("k", "a", 2, lease=2.0) == (True, ["a"])
    assert await world.acquire_slot("k", "b", 2, lease=30) == (True, ["a", "b"])
    assert await world.acquire_slot("k", "c", 2, lease=30) == (False, ["a", "b"])
    await asyncio.sleep(1.0)
    assert (await world.acquire_slot("k", "a", 2, lease=2.0))[0]  # renewed
    await asyncio.sleep(1.2)
    assert await world.acquire_slot("k", "c", 2, lease=30) == (False, ["a", "b"])  # still held
    await asyncio.sleep(1.0)
    assert await world.acquire_slot("k", "c", 2, lease=30) == (True, ["b", "c"])  # a expired
    await world.release_slot("k", "b")
    await world.release_slot("k", "b")  # twice: a no-op
    assert await world.acquire_slot("k", "d", 2, lease=30) == (True, ["c", "d"])


async def test_a_renewal_after_the_lease_ran_out_is_lost(engine: Engine) -> None:
    """A holder stalled past its lease (a CPU-bound body blocking its loop) while another
    took the slot, ran and gave it back: its late renewal finds room, yet must report the
    slot lost (its body is fenced), or both would have held one slot at once."""
    world = engine.world
    assert await world.acquire_slot("k", "a", 1, lease=0.4) == (True, ["a"])
    assert await world.renew_slot("k", "a", lease=0.4)  # held, unexpired: renewed
    await asyncio.sleep(0.6)
    assert await world.acquire_slot("k", "b", 1, lease=30) == (True, ["b"])  # a expired
    await world.release_slot("k", "b")
    assert not await world.renew_slot("k", "a", lease=30)  # the slot is free, yet lost
    assert await world.acquire_slot("k", "c", 1, lease=30) == (True, ["c"])  # a took nothing
    assert not await world.renew_slot("k", "a", lease=30)
    assert await world.acquire_slot("k2", "a", 1, lease=0.3) == (True, ["a"])
    await asyncio.sleep(0.5)
    assert not await world.renew_slot("k2", "a", lease=30)  # expired, even if untaken
    assert not await world.renew_slot("k3", "nobody", lease=30)


async def _running(engine: Engine) -> str:
    run_id = new_run_id()
    created = NewEvent(EventType.RUN_CREATED, data={"workflow": "wf", "input": []})
    await engine.world.append(run_id, [created], expected_seq=0)
    await engine.world.append(run_id, [NewEvent(EventType.RUN_STARTED)], expected_seq=1)
    return run_id


async def test_a_waiting_steps_block_never_replaces_or_lifts_a_newer_block(
    engine: Engine,
) -> None:
    """The run's status a waiting step shows is decided on the run it read: a divergence
    block written since is neither overwritten by the step's block nor lifted when the
    step gets its slot."""
    world, step = engine.world, StepView("s1", "slot_flows.render", 0.0)
    wait = step_slots.Wait("k", ["other:s1"], 1)
    diverged = NewEvent(EventType.RUN_BLOCKED, data={"code": divergence.CODE, "message": "m"})
    run_id = await _running(engine)
    stale = await world.get_run(run_id)
    assert stale is not None and stale.status is RunStatus.RUNNING
    await world.append(run_id, [diverged])
    await step_slots.show_waiting(world, stale, step, wait)
    now = await world.get_run(run_id)
    assert now is not None and divergence.held(now)  # not overwritten
    other = await _running(engine)
    fresh = await world.get_run(other)
    assert fresh is not None
    await step_slots.show_waiting(world, fresh, step, wait)
    stale = await world.get_run(other)
    assert stale is not None and step_slots.waiting(stale)
    await world.append(other, [diverged])
    await step_slots.show_taken(world, stale, step)
    now = await world.get_run(other)
    assert now is not None and divergence.held(now)  # not lifted
    await world.append(other, [NewEvent(EventType.RUN_UNBLOCKED)])
    moved = await world.get_run(other)
    assert moved is not None
    await step_slots.show_waiting(world, moved, step, wait)
    stale = await world.get_run(other)
    assert stale is not None and step_slots.waiting(stale)
    await world.append(other, [NewEvent(EventType.STEP_CREATED, "s2", {"stepName": "b"})])
    await step_slots.show_taken(world, stale, step)  # stale by one event: read again
    now = await world.get_run(other)
    assert now is not None and now.status is RunStatus.RUNNING


def test_step_limits_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="lease"):
        wayline.Limit(lease=0)
    with pytest.raises(ConfigurationError, match="lease"):
        wayline.Limit(lease="soon")
    with pytest.raises(ConfigurationError, match="steps"):
        wayline.workflow(concurrency=wayline.Limit(lease=5))(sf.render_one.fn)
    with pytest.raises(ConfigurationError, match="Limit"):
        wayline.step(concurrency=2)(sf.render.fn)  # type: ignore[call-overload]
    assert sf.render.queued_only


async def test_a_fenced_holder_gives_its_slot_back(engine: Engine, tmp_path: Path) -> None:
    """The holder's body outlives the invocation bound and is cut off: its slot is free at
    once (the lease is 60 s, longer than the test waits), and its step is retried."""
    path = str(tmp_path / "marks")
    world = await engine.make_world(visibility_seconds=2.0)
    bound = settings(max_invocation_seconds=1.5, lease_seconds=4.0)
    async with engine.worker([sf.solo_one], world=world, settings=bound):
        slow = await engine.client.start(sf.solo_one, path, "slow")
        await wait_for(lambda: _started(path, "slow"))
        quick = await engine.client.start(sf.solo_one, path, "quick")
        assert await quick.result(timeout=20) == "quick"
        assert await slow.result(timeout=20) == "slow"
    assert sf.most_at_once(path) == 1
    assert sf.runs_of(path, "slow") == 2 and sf.runs_of(path, "quick") == 1
    [retried] = of_type(await slow.events(), EventType.STEP_RETRYING)
    assert retried.data["error"]["code"] == "INVOCATION_FENCED"


async def _started(path: str, tag: str) -> bool:
    return sf.runs_of(path, tag) >= 1


async def test_a_holder_whose_renewals_fail_stops_before_its_lease_runs_out(
    engine: Engine, tmp_path: Path
) -> None:
    """The holder cannot renew its slot (it cannot reach the world's slots; its delivery
    renews, with 30 s of visibility, so only the slot's own fence can stop it in time): its
    body is cut off before the lease (3 s) runs out, and gives the slot back (the world is
    reachable): the waiting run and the cut-off attempt's retry then take it in turn.
    (tests/faults/test_slot_partition.py cuts the holder off the network instead.)"""
    path = str(tmp_path / "marks")
    sick = await engine.make_world(visibility_seconds=30.0)

    async def no_renewal(key: str, holder: str, *, lease: float, token: str | None) -> bool:
        raise wayline.WorldUnavailableError("slot renewals cut off (test)")

    sick.renew_slot = no_renewal  # type: ignore[method-assign]
    async with engine.worker([sf.held_one], world=sick):
        holding = await engine.client.start(sf.held_one, path, "a", 10.0)
        await wait_for(lambda: _held(path, "a"), timeout=20)  # only it could take the slot
        async with engine.worker([sf.held_one]):
            waiting = await engine.client.start(sf.held_one, path, "b", 1.0)
            results = [await h.result(timeout=30) for h in (holding, waiting)]
    assert sf.overlaps(path) == [], sf.spans(path)
    assert results == ["a attempt 2", "b attempt 1"]
    bodies = [what for _, _, what in sf.spans(path)]
    assert sorted(bodies) == ["a 1 cut", "a 2 end", "b 1 end"] and bodies[0] == "a 1 cut"
    [retrying] = of_type(await holding.events(), EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"
    assert "not renewed" in retrying.data["error"]["message"]


async def _held(path: str, tag: str) -> bool:
    return any(what.startswith(f"{tag} ") for _, _, what in sf.spans(path))


async def test_a_run_cancelled_while_its_step_waits_ends_without_the_body(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    key = "step:slot_flows.render:*"
    for ghost in ("busy:s1", "busy:s2"):
        assert (await engine.world.acquire_slot(key, ghost, 2, lease=30))[0]
    async with engine.worker([sf.render_one]):
        handle = await engine.client.start(sf.render_one, path, "never", 0.1)

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=15)
        await engine.world.release_slot(key, "busy:s1")
        await asyncio.sleep(1.5)  # the step's message comes back and finds the run ended
    assert sf.runs_of(path, "never") == 0
    assert not of_type(await handle.events(), EventType.STEP_STARTED)
    assert await engine.world.acquire_slot(key, "next", 2, lease=1) == (True, ["busy:s2", "next"])


@pytest.mark.parametrize("won", [True, False], ids=["renewed", "lost"])
async def test_a_slot_renewer_that_loses_its_cancel_still_ends(
    engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    won: bool,
) -> None:
    """A cancel that lands just as a world call completes can be lost (``asyncio.wait_for``
    before Python 3.12, which the NATS client uses). The slot's renewer is cancelled when its
    body ends: had it kept renewing, the step would wait for it for good (its run never
    finishing, its slot and delivery held). A renewal that then answers "lost" cuts nothing
    off: the body is over."""
    marker = str(tmp_path / "renewing")
    renew = engine.world.renew_slot
    swallowed: list[bool] = []

    async def losing_its_cancel(key: str, holder: str, *, lease: float, token: str | None) -> bool:
        if swallowed:
            return await renew(key, holder, lease=lease, token=token)
        swallowed.append(False)
        sf.mark(marker)  # the body ends now, and the renewer is cancelled in this call
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            swallowed[0] = True  # the call completed as the cancel came: the cancel is gone
        return await renew(key, holder, lease=lease, token=token) and won

    monkeypatch.setattr(engine.world, "renew_slot", losing_its_cancel)
    async with engine.worker([sf.renewed_one], shutdown_grace_seconds=1.0):
        handle = await engine.client.start(sf.renewed_one, marker)
        assert await handle.result(timeout=10) == "done"  # it waited for good
    assert swallowed == [True]
    assert "its body is cut off" not in caplog.text


async def test_a_stale_attempt_leaves_its_redelivery_the_slot(
    make_world: Any, tmp_path: Path
) -> None:
    """Worker A's delivery renewals stall past the visibility, so the step's delivery goes to
    worker B, whose attempt 2 takes the step's slot again (the same holder, ``run:stepId``);
    A's attempt 1 is then cut off and gives its slot back. That gave back attempt 2's slot
    too: another run's step took the ``max=1`` slot while attempt 2's body still ran."""
    path = str(tmp_path / "marks")
    # the first world opened sets the queue's visibility (on NATS, the consumer's ack wait)
    stalled = await make_world(visibility_seconds=2.0)
    other = await make_world(visibility_seconds=2.0)
    renew = stalled.renew
    stalls: list[float] = []

    async def stalling(delivery: Any) -> bool:
        # Every renewal asked in the first 4 s hangs (the worker gives up waiting for one and
        # asks again): none gets through within the visibility, and the delivery lapses.
        if not stalls:
            stalls.append(time.monotonic())
        if time.monotonic() - stalls[0] < 4.0:
            await asyncio.sleep(4.0)
        return await renew(delivery)

    stalled.renew = stalling
    receive = stalled.receive

    async def deaf(topic: str, *args: Any, **kwargs: Any) -> Any:
        # once attempt 1 runs, worker A takes no more deliveries: on NATS it would otherwise
        # be handed the redelivery itself, and its in-process single flight would absorb it
        if await _body(path, "start r1 1"):
            await asyncio.sleep(0.2)
            return []
        return await receive(topic, *args, **kwargs)

    stalled.receive = deaf
    client = wayline.Client(other)
    bound = settings(max_invocation_seconds=20)
    async with wayline.Worker(stalled, [sf.redelivered_one], settings=bound):
        first = await client.start(sf.redelivered_one, path, "r1", 6.0)
        await wait_for(lambda: _body(path, "start r1 1"), timeout=20)
        async with wayline.Worker(other, [sf.redelivered_one], settings=bound):
            await wait_for(lambda: _body(path, "start r1 2"), timeout=20)  # the redelivery
            await wait_for(lambda: _body(path, "end r1 1"), timeout=20)  # A cut off, gave back
            second = await client.start(sf.redelivered_one, path, "r2", 0.5)
            assert await second.result(timeout=30) == "r2 attempt 1"
            assert await first.result(timeout=30) == "r1 attempt 2"
    assert [o for o in sf.overlaps(path) if "r2" in o[0] + o[1]] == [], sf.spans(path)


async def _body(path: str, start: str) -> bool:
    return any(line.startswith(start + " ") for line in sf.lines(path))


async def test_a_close_keeps_the_slot_of_a_sync_body_still_running(
    engine: Engine, tmp_path: Path
) -> None:
    """The close cancels the handler once its grace runs out; the sync body runs on in its
    thread, its delivery kept held, and so is its slot: no other holder takes the ``max=1``
    slot until the body ends, and the slot is given back then."""
    path = str(tmp_path / "marks")
    key = "step:slot_flows.held_sync:one"
    worker = wayline.Worker(
        engine.world, [sf.held_sync_one], settings=settings(), shutdown_grace_seconds=0.3
    )
    await worker.start()
    await engine.client.start(sf.held_sync_one, path, "a", 4.0)
    await wait_for(lambda: _held(path, "a"), timeout=20)
    closing = asyncio.ensure_future(worker.close())
    try:
        await asyncio.sleep(1.5)  # past the grace: the handler was cancelled
        assert not closing.done()
        [(_, _, body)] = sf.spans(path)
        assert body == "a 1 running"
        won, holders = await engine.world.acquire_slot(key, "another:step", 1, lease=3.0)
        assert not won, f"another took the slot while the body still ran (holders {holders})"
    finally:
        await closing

    async def given_back() -> bool:
        return (await engine.world.acquire_slot(key, "another:step", 1, lease=3.0))[0]

    await wait_for(given_back)
    [(_, _, body)] = sf.spans(path)
    assert body == "a 1 end"
