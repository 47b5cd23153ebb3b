"""A well-formed hook-token claim that names a live run but no hook open in it (written by
anything that can reach the hooks bucket or table) holds nothing: the run that creates a hook
with that token takes it over at once, not after the claim grace. On both worlds."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

import wayline
from tests.hostile import flows
from tests.hostile.poison import _nc
from tests.runtime.harness import Engine, wait_for
from wayline.world import World
from wayline.worlds.local import LocalWorld


async def forge_claim(world: World, token: str, run_id: str, cid: str) -> None:
    """A claim of ``token`` for hook ``cid`` of ``run_id``, as Wayline would write one."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            db.execute(
                "INSERT INTO hooks (token, run_id, cid, active, created_at) VALUES (?,?,?,1,?)",
                (token, run_id, cid, time.time()),
            )
            db.commit()
        finally:
            db.close()
        return
    from wayline.worlds.nats.names import kv_key

    claim = {"token": token, "run": run_id, "cid": cid, "active": True}
    nc = await _nc(world)
    try:
        kv = await nc.jetstream().key_value(world.names.hooks_bucket)  # type: ignore[attr-defined]
        await kv.put(kv_key(token), json.dumps(claim).encode())
    finally:
        await nc.close()


async def _active_for(world: World, token: str, run_id: str) -> bool:
    hook = await world.get_hook(token)
    return hook is not None and hook.active and hook.run_id == run_id


@pytest.mark.parametrize("cid", ["h-forged", "step-1"], ids=["no-such-hook", "not-a-hook"])
async def test_a_forged_claim_on_a_live_run_is_taken_over_at_once(
    engine: Engine, tmp_path: Path, cid: str
) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        live = await engine.client.start(flows.gated, path, "live-tok")
        await wait_for(lambda: _active_for(engine.world, "live-tok", live.run_id))
        await forge_claim(engine.world, "shared", live.run_id, cid)
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook("shared", 1)  # the claim is no hook
        run = await engine.client.start(flows.gated, path, "shared")
        # the claim grace is 30 s: well within it, the rightful claimant holds the token
        await wait_for(lambda: _active_for(engine.world, "shared", run.run_id), timeout=10)
        await engine.client.resume_hook("shared", "mine")
        await engine.client.resume_hook("live-tok", "theirs")
        assert await run.result(timeout=15) == "mine"
        assert await live.result(timeout=15) == "theirs"
    assert flows.count(path, "before") == 2 and flows.count(path, "after") == 2
