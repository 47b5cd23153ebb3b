"""Adversarial races of a worker's close and death, in one process on both worlds: a worker closed
while an async body swallows its cancellation, a ``timeout=`` (queued) step under a forced close,
and children whose parent and child run on different workers, one of which dies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import adversarial_flows as af
from tests.runtime import race2_flows as rf
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType


def _seen(path: str) -> list[str]:
    return [line.rpartition(" ")[0] for line in af.lines(path)]


async def _started(path: str, n: int = 1) -> bool:
    return len(af.spans(path, "charge")) >= n


def _refund_after_every_charge(path: str) -> None:
    seen = _seen(path)
    assert not af.overlapping(path, "charge"), seen
    refund_at = seen.index("refund-start")
    before = seen[:refund_at]
    assert before.count("charge-start") == before.count("charge-end"), seen
    assert "charge-start" not in seen[refund_at:], seen
    assert seen.count("refund-start") == 1, seen


@pytest.mark.parametrize("graceful", [True, False])
async def test_close_mid_async_body_that_swallows_cancel_then_cancel(
    engine: Engine, tmp_path: Path, graceful: bool
) -> None:
    """The body catches the CancelledError of the worker's close and runs on: a replacement
    must not run the charge beside it, nor the cancel's refund before it ends."""
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [rf.r2_swallow], settings=settings(), shutdown_grace_seconds=0.2
    )
    await first.start()
    handle = await engine.client.start(rf.r2_swallow, marker, 2.0)
    await wait_for(lambda: _started(marker))
    closing = asyncio.ensure_future(first.close(graceful=graceful))
    await asyncio.sleep(0.3)
    assert await engine.client.cancel(handle.run_id)
    async with engine.worker([rf.r2_swallow], world=await engine.make_world()):
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
        await asyncio.wait_for(closing, 20)
        await asyncio.sleep(0.3)
    _refund_after_every_charge(marker)


async def test_close_mid_async_body_that_swallows_cancel_runs_it_once_at_a_time(
    engine: Engine, tmp_path: Path
) -> None:
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [rf.r2_swallow], settings=settings(), shutdown_grace_seconds=0.2
    )
    await first.start()
    handle = await engine.client.start(rf.r2_swallow, marker, 1.5)
    await wait_for(lambda: _started(marker))
    closing = asyncio.ensure_future(first.close(graceful=False))
    async with engine.worker([rf.r2_swallow], world=await engine.make_world()):
        hook = f"r2-swallow:{marker}"
        await wait_for(lambda: engine.world.get_hook(hook), timeout=20)
        await engine.client.resume_hook(hook, 1)
        assert await handle.result(timeout=20) == "charged"
        await asyncio.wait_for(closing, 20)
    assert not af.overlapping(marker, "charge"), _seen(marker)
    events = await engine.client.world.list_events(handle.run_id)
    assert len(of_type(events, EventType.STEP_COMPLETED)) == 1


@pytest.mark.parametrize("graceful", [True, False])
async def test_timeout_step_worker_closed_mid_body_then_cancel(
    engine: Engine, tmp_path: Path, graceful: bool
) -> None:
    """A queued (``timeout=``) step's delivery is released by a closing worker: no second
    body beside the first, and the cancel's refund only after the charge ended."""
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [rf.r2_timed], settings=settings(), shutdown_grace_seconds=0.2
    )
    await first.start()
    handle = await engine.client.start(rf.r2_timed, marker, 1.5)
    await wait_for(lambda: _started(marker))
    await first.close(graceful=graceful)
    async with engine.worker([rf.r2_timed], world=await engine.make_world()):
        await wait_for(lambda: _started(marker, 2), timeout=20)  # cut off: it runs again
        assert await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    _refund_after_every_charge(marker)


async def test_parent_worker_dies_while_child_runs_on_another_worker(
    engine: Engine, tmp_path: Path
) -> None:
    """Parent and child are served by different workers; the parent's dies (forced close)
    while the child charges. A replacement parent worker resumes: one child, one charge."""
    marker = str(tmp_path / "m")
    parents = wayline.Worker(engine.world, [rf.r2_parent], settings=settings())
    await parents.start()
    async with engine.worker([rf.r2_kid], world=await engine.make_world()):
        handle = await engine.client.start(rf.r2_parent, marker, 1.0)
        await wait_for(lambda: _started(marker))
        await parents.close(graceful=False)
        hook = f"r2-kid:{marker}"
        await wait_for(lambda: engine.world.get_hook(hook), timeout=20)
        await engine.client.resume_hook(hook, 1)
        await asyncio.sleep(0.5)  # the child ends while no parent worker runs
        async with engine.worker([rf.r2_parent], world=await engine.make_world()):
            assert await handle.result(timeout=20) == "parent got charged"
    events = await engine.world.list_events(handle.run_id)
    assert len(of_type(events, EventType.CHILD_CREATED)) == 1, events
    assert len(af.spans(marker, "charge")) == 1, _seen(marker)


@pytest.mark.parametrize("graceful", [True, False])
async def test_child_worker_dies_mid_charge_while_parent_is_cancelled(
    engine: Engine, tmp_path: Path, graceful: bool
) -> None:
    """The child's worker closes mid sync charge (its thread runs on) and the parent is
    cancelled at that moment: the child's refund never runs beside its charge, once, and the
    parent ends cancelled after the child."""
    marker = str(tmp_path / "m")
    kids = wayline.Worker(
        engine.world, [rf.r2_kid], settings=settings(), shutdown_grace_seconds=0.2
    )
    await kids.start()
    async with engine.worker([rf.r2_parent], world=await engine.make_world()):
        handle = await engine.client.start(rf.r2_parent, marker, 2.0)
        await wait_for(lambda: _started(marker))
        closing = asyncio.ensure_future(kids.close(graceful=graceful))
        await asyncio.sleep(0.2)
        assert await engine.client.cancel(handle.run_id)
        async with engine.worker([rf.r2_kid], world=await engine.make_world()):
            with pytest.raises(wayline.RunCancelledError):
                await handle.result(timeout=25)
            await asyncio.wait_for(closing, 20)
    _refund_after_every_charge(marker)
    events = await engine.world.list_events(handle.run_id)
    kid = of_type(events, EventType.CHILD_CREATED)[0].data
    kid_id = kid.get("runId") or kid.get("childRunId")
    assert (await engine.client.get_run(kid_id)).status is wayline.RunStatus.CANCELLED
