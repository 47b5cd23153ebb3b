"""Inline step ownership on every world: the backstop's two lessons (seed 000) and lost owners."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.world import FLOW_TOPIC

SHORT = {"lease_seconds": 2.0, "max_invocation_seconds": 1.5}
VISIBILITY = 0.4
"""The world's visibility under SHORT: the bound plus it must stay below the lease."""


async def test_retry_handoff_is_not_absorbed_by_a_pending_backstop(
    engine: Engine, tmp_path: Path
) -> None:
    """Lesson 1: a wake arms a backstop mid-step; the step then fails once. Its ~1 s retry must
    not wait for the 860 s lease."""
    marker = str(tmp_path / "m")
    async with engine.worker([flows.retry_under_backstop]):
        handle = await engine.client.start(flows.retry_under_backstop, marker)
        await wait_for(lambda: _has_lines(marker, 1))
        await engine.client.resume_hook(f"retry:{marker}", "wake")  # arms the backstop
        assert await handle.result(timeout=20) == ["ok", "wake"]
    assert flows.lines(marker) == ["attempt 1", "attempt 2"]
    events = await handle.events()
    [retrying] = of_type(events, EventType.STEP_RETRYING)
    second = of_type(events, EventType.STEP_STARTED)[1]
    assert second.created_at - retrying.created_at < 10  # the backoff, not the lease


async def _ghost_owned_run(engine: Engine, marker: str, owner: str) -> str:
    """A run whose inline step s1 was stamped by a message that no longer exists."""
    run_id = new_run_id()
    inp = {"args": [marker, 0.1]}
    await engine.world.append(
        run_id,
        [
            NewEvent(EventType.RUN_CREATED, data={"workflow": "single_slow", "input": inp}),
            NewEvent(EventType.RUN_STARTED),
            NewEvent(
                EventType.STEP_CREATED,
                "s1",
                {"stepName": "slow_marker", "input": inp, "occurrence": 0},
            ),
            NewEvent(EventType.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": owner}),
        ],
    )
    return run_id


async def test_lost_owner_message_is_recovered_after_the_lease(
    engine: Engine, tmp_path: Path
) -> None:
    """Owner-message loss the runtime never observes (dead-lettered, purged): a wake defers
    to the ghost only for the lease, then its backstop recovers the step."""
    marker = str(tmp_path / "m")
    run_id = await _ghost_owned_run(engine, marker, "ghost-1")
    async with engine.worker(
        [flows.single_slow],
        settings=settings(**SHORT),
        world=await engine.make_world(visibility_seconds=VISIBILITY),
    ):
        await engine.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "hook"})
        assert await engine.client.handle(run_id).result(timeout=20) == "done"
    assert flows.lines(marker) == ["attempt 2"]
    starts = of_type(await engine.world.list_events(run_id), EventType.STEP_STARTED)
    assert starts[-1].created_at - starts[0].created_at >= 1.9


async def test_backstop_of_a_refreshed_epoch_publishes_its_replacement(
    engine: Engine, tmp_path: Path
) -> None:
    """Lesson 2: the epoch-1 backstop fires while a re-stamp (owner recovery) keeps the lease
    alive. Its re-arm must not dedupe against itself (it is still in flight), or once the
    recovered owner is gone nothing would ever wake the run."""
    marker = str(tmp_path / "m")
    run_id = await _ghost_owned_run(engine, marker, "ghost-1")
    async with engine.worker(
        [flows.single_slow],
        settings=settings(**SHORT),
        world=await engine.make_world(visibility_seconds=VISIBILITY),
    ):
        await engine.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "hook"})
        await asyncio.sleep(1.0)
        # owner recovery by another (soon lost) delivery re-stamps: a new ownership epoch
        [restamp] = await engine.world.append(
            run_id,
            [NewEvent(EventType.STEP_STARTED, "s1", {"attempt": 2, "ownerMessageId": "ghost-2"})],
        )
        assert await engine.client.handle(run_id).result(timeout=20) == "done"
    assert flows.lines(marker) == ["attempt 3"]
    starts = of_type(await engine.world.list_events(run_id), EventType.STEP_STARTED)
    assert starts[-1].created_at >= restamp.created_at + 1.9  # the refreshed lease was honoured


async def _has_lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n


async def test_a_body_that_would_outlive_the_lease_is_cut_off_at_the_bound(
    engine: Engine, tmp_path: Path
) -> None:
    """Once the documented residual (a body outliving the lease, a late wake then queueing the
    step beside it, the single-flight loser carrying the retry): the fence now cuts every
    attempt off at the bound, before its delivery can be redelivered. Each attempt counts and
    is recorded; the step fails for good when its retries are spent."""
    marker = str(tmp_path / "m")
    # Not SHORT with a 0.4 s visibility: a fence trips after 0.2 s without a renewal there,
    # and its delivery is given up a third of a second after its last renewal, cut or not.
    # At load 8-21 a cut body had not ended by then (the process would have exited, 70), its
    # delivery came back once more than a step may be delivered, and the step failed with
    # MAX_ATTEMPTS_EXCEEDED instead of INVOCATION_FENCED. At a 2 s visibility (a 3 s bound,
    # a 6 s lease) the same happened at load 35-40: a renewal 1.7 s late tripped the fence
    # before the bound, the delivery was given up and redelivered, and one retry of the two
    # went unrecorded. Here the bound (6 s) plus the visibility (4 s) stays below the lease
    # (12 s), and the body (10 s) outlives both.
    async with engine.worker(
        [flows.outlives_lease],
        settings=settings(lease_seconds=12.0, max_invocation_seconds=6.0),
        world=await engine.make_world(visibility_seconds=4.0),
    ):
        handle = await engine.client.start(flows.outlives_lease, marker, 10.0)
        await wait_for(lambda: _has_lines(marker, 1))
        await asyncio.sleep(12.2)  # past the 12 s lease: the first attempt was cut off
        await engine.client.resume_hook(f"outlive:{marker}", "late wake")
        with pytest.raises(wayline.RunFailedError):
            await handle.result(timeout=60)
    assert flows.lines(marker) == ["attempt 1", "attempt 2", "attempt 3"]
    events = await handle.events()
    retrying = of_type(events, EventType.STEP_RETRYING)
    assert [e.data["error"]["code"] for e in retrying] == ["INVOCATION_FENCED"] * 2
    [failed] = of_type(events, EventType.STEP_FAILED)
    assert failed.data["error"]["code"] == "INVOCATION_FENCED"


async def test_a_worker_with_a_shorter_lease_waits_for_the_owners_own(
    engine: Engine, tmp_path: Path
) -> None:
    """A rolling upgrade that shortens the lease (and the bound under it): an owner of the old
    version may run its body for its own bound, so a new worker that reads the step must not
    take it for dead after its own, shorter lease. ``step_started`` records the owner's lease,
    and a reader waits for the longer of the two. (The owner consumes no step messages here,
    and no second flow delivery while it holds the first: every wake goes to the new worker.)"""
    marker = str(tmp_path / "m")
    async with engine.worker([flows.single_slow], flow_concurrency=1, step_concurrency=0):
        handle = await engine.client.start(flows.single_slow, marker, 4.0)
        await wait_for(lambda: _has_lines(marker, 1))
        [start] = of_type(await handle.events(), EventType.STEP_STARTED)
        assert start.data["lease"] == settings().lease_seconds
        async with engine.worker(
            [flows.single_slow],
            settings=settings(**SHORT),
            world=await engine.make_world(visibility_seconds=VISIBILITY),
        ):
            await asyncio.sleep(2.5)  # past the new worker's lease, well inside the owner's
            await engine.world.enqueue(FLOW_TOPIC, {"runId": handle.run_id, "reason": "hook"})
            assert await handle.result(timeout=20) == "done"
    assert flows.lines(marker) == ["attempt 1"]
