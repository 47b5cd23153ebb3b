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
