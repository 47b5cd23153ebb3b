"""Closing a worker while a sync (thread) step body runs: the delivery must not come back to
another worker while that thread still runs the body (seed 000: "redelivered" must mean "the
previous holder stopped"). Kubernetes sends SIGTERM and the worker closes with a grace that a
long body can outlive; ``wayline worker`` then closes gracefully, and the library offers
``close(graceful=False)``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import adversarial_flows as af
from tests.runtime.harness import Engine, settings, wait_for


async def _started(path: str, n: int = 1) -> bool:
    return len(af.spans(path, "charge")) >= n


@pytest.mark.parametrize("graceful", [True, False])
async def test_closing_mid_sync_body_never_runs_it_beside_the_thread(
    engine: Engine, tmp_path: Path, graceful: bool
) -> None:
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [af.adv_sync_charge], settings=settings(), shutdown_grace_seconds=0.2
    )
    await first.start()
    handle = await engine.client.start(af.adv_sync_charge, marker, 2.0)
    await wait_for(lambda: _started(marker))
    await first.close(graceful=graceful)  # the grace (0.2 s) is shorter than the body (2 s)
    # a replacement (another pod) takes over the run at once
    async with engine.worker([af.adv_sync_charge], world=await engine.make_world()):
        await asyncio.sleep(2.5)  # the first thread finishes meanwhile
        hook = f"adv-sync:{marker}"
        await wait_for(lambda: engine.world.get_hook(hook), timeout=15)
        await engine.client.resume_hook(hook, 1)
        assert await handle.result(timeout=15) == "charged"
    assert not af.overlapping(marker, "charge"), af.lines(marker)


async def test_a_cancel_after_a_forced_close_never_refunds_beside_the_charge(
    engine: Engine, tmp_path: Path
) -> None:
    """The worker is force-closed while the charge (a sync body) runs, and the run is
    cancelled: the replacement's unwind must not refund while the charge's thread still runs
    (the owner is not provably dead: its thread lives on)."""
    marker = str(tmp_path / "m")
    first = wayline.Worker(engine.world, [af.adv_sync_charge], settings=settings())
    await first.start()
    handle = await engine.client.start(af.adv_sync_charge, marker, 2.0)
    await wait_for(lambda: _started(marker))
    await first.close(graceful=False)
    assert await engine.client.cancel(handle.run_id)
    async with engine.worker([af.adv_sync_charge], world=await engine.make_world()):
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=15)
        await asyncio.sleep(2.2)  # the first thread finishes meanwhile
    seen = [line.rpartition(" ")[0] for line in af.lines(marker)]
    refund_at = seen.index("refund-start")
    assert "charge-end" in seen[:refund_at], seen  # every charge ended before the refund
    assert seen.count("charge-start") == seen[:refund_at].count("charge-end"), seen


@pytest.mark.parametrize("how", ["run-then-close", "two-closes"])
async def test_a_second_close_beside_the_first_never_runs_the_body_beside_the_thread(
    engine: Engine, tmp_path: Path, how: str
) -> None:
    """``Worker.run()`` closes in its ``finally`` when another task closes the worker (two
    closes at once), or two tasks close it (a SIGTERM handler and a supervisor): neither may
    release the delivery while the sync body's thread still runs."""
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [af.adv_sync_charge], settings=settings(), shutdown_grace_seconds=0.2
    )
    runner = asyncio.create_task(first.run()) if how == "run-then-close" else None
    await first.start()
    handle = await engine.client.start(af.adv_sync_charge, marker, 2.0)
    await wait_for(lambda: _started(marker))
    closes = [first.close(graceful=False)]
    if runner is None:
        closes.append(first.close(graceful=True))
    await asyncio.gather(*closes)
    if runner is not None:
        await runner
    async with engine.worker([af.adv_sync_charge], world=await engine.make_world()):
        await asyncio.sleep(2.5)
        hook = f"adv-sync:{marker}"
        await wait_for(lambda: engine.world.get_hook(hook), timeout=15)
        await engine.client.resume_hook(hook, 1)
        assert await handle.result(timeout=15) == "charged"
    assert not af.overlapping(marker, "charge"), af.lines(marker)


@wayline.step(max_retries=2, retry_delay=0.05)
def charge_after_a_retry(path: str, seconds: float) -> str:
    """Fails its first attempt, so the second runs under a step message (queue-owned)."""
    import os
    import time

    if not os.path.exists(path + ".tried"):
        open(path + ".tried", "w").close()
        raise RuntimeError("first attempt fails")
    af.stamp(path, "charge-start")
    time.sleep(seconds)
    af.stamp(path, "charge-end")
    return "charged"


@wayline.workflow
async def adv_retried_sync_charge(path: str, seconds: float) -> str:
    charged = await charge_after_a_retry(path, seconds)
    await wayline.create_hook(f"adv-retried:{path}")
    return str(charged)


@pytest.mark.parametrize("graceful", [True, False])
async def test_closing_mid_sync_body_of_a_step_delivery_never_runs_it_beside_the_thread(
    engine: Engine, tmp_path: Path, graceful: bool
) -> None:
    """The same for a body run under a step message (a retried step), not the run's."""
    marker = str(tmp_path / "m")
    flow = adv_retried_sync_charge
    first = wayline.Worker(engine.world, [flow], settings=settings(), shutdown_grace_seconds=0.2)
    await first.start()
    handle = await engine.client.start(flow, marker, 2.0)
    await wait_for(lambda: _started(marker))
    await first.close(graceful=graceful)
    async with engine.worker([flow], world=await engine.make_world()):
        await asyncio.sleep(2.5)
        hook = f"adv-retried:{marker}"
        await wait_for(lambda: engine.world.get_hook(hook), timeout=15)
        await engine.client.resume_hook(hook, 1)
        assert await handle.result(timeout=15) == "charged"
    assert not af.overlapping(marker, "charge"), af.lines(marker)
