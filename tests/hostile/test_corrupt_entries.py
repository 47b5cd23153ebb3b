"""Bytes Wayline never wrote in the hook-token and idempotency stores: typed errors for the
reader, and the rightful claimant overwrites the entry, so no run fails or crash-loops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wayline
from tests.hostile import flows
from tests.hostile.poison import is_local, poison_hook, poison_idem
from tests.runtime.harness import Engine, wait_for
from wayline._core.ids import new_run_id
from wayline.errors import CorruptEntryError

HOOK_GARBAGE = [
    b"\xff\xfe\x00",
    b"{}",
    b"[" * 50_000,
    json.dumps({"token": "other", "run": "x", "cid": "y", "active": True}).encode(),
    json.dumps({"token": "tok", "run": "wf_" + "0" * 32, "cid": "h", "active": True}).encode(),
]


@pytest.mark.parametrize("garbage", HOOK_GARBAGE, ids=lambda g: repr(g[:12]))
async def test_garbage_under_a_hook_token_is_typed_and_the_claimant_overwrites_it(
    engine: Engine, tmp_path: Path, garbage: bytes
) -> None:
    token = "tok"
    await poison_hook(engine.world, token, garbage)
    if is_local(engine.world) or garbage != HOOK_GARBAGE[-1]:
        with pytest.raises(CorruptEntryError) as info:
            await engine.client.resume_hook(token, 1)
        assert info.value.code == "CORRUPT_ENTRY" and info.value.key == token
    else:  # well-formed, naming a run that does not exist: no such hook
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook(token, 1)
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        run = await engine.client.start(flows.gated, path, token)

        async def active() -> bool:
            try:
                hook = await engine.world.get_hook(token)
            except CorruptEntryError:
                return False  # until the run's hook claims the token
            return hook is not None and hook.active and hook.run_id == run.run_id

        await wait_for(active)
        await engine.client.resume_hook(token, "paid")
        assert await run.result(timeout=15) == "paid"
    assert flows.count(path, "before") == 1 and flows.count(path, "after") == 1


@pytest.mark.parametrize(
    "garbage",
    [b"\xff", b"null", b"{}", json.dumps({"mid": 1, "topic": "flow"}).encode(), b"[" * 50_000],
    ids=lambda g: repr(g[:12]),
)
async def test_garbage_under_an_idempotency_key_is_overwritten_by_the_next_enqueue(
    engine: Engine, tmp_path: Path, garbage: bytes
) -> None:
    if is_local(engine.world):
        pytest.skip("SQLite keeps idempotency keys in a column of the message row itself")
    run_id = new_run_id()
    await poison_idem(engine.world, f"{run_id}:start", garbage)
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        run = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), flows.gated, path, "t-idem"
        )
        await wait_for(lambda: _active(engine, "t-idem"))
        await engine.client.resume_hook("t-idem", 7)
        assert await run.result(timeout=15) == 7
    assert flows.count(path, "before") == 1


async def _active(engine: Engine, token: str) -> bool:
    hook = await engine.world.get_hook(token)
    return hook is not None and hook.active


async def test_a_deeply_nested_queue_row_does_not_stop_a_worker_starting(tmp_path: Path) -> None:
    """Recovery at a worker's start reads every queued message's run id: a row nested past the
    interpreter's recursion limit is passed over there (and dead-lettered when delivered), not
    a ``RecursionError`` that stopped every worker from starting on the world."""
    import sqlite3

    import wayline
    from tests.runtime import flows
    from tests.runtime.harness import settings
    from wayline.worlds.local import LocalWorld

    db = tmp_path / "w.db"
    async with LocalWorld(db) as world:
        pass
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO messages (topic, payload, available_at, created_at) VALUES (?,?,?,?)",
            ("flow", b"[" * 100_000, 0.0, 0.0),
        )
    async with LocalWorld(db) as world:
        assert await world.runs_with_messages() == set()
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            run = await wayline.Client(world).start(flows.chain, 3)
            assert await run.result(timeout=15) == 3  # 0 + 1 + 2
