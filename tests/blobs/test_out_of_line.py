"""Payloads over the inline threshold are stored out of line (a blob table on SQLite, an
Object Store bucket on NATS) and their events carry a reference: inputs, step arguments and
results and hook payloads of many MiB round-trip, replay after a worker restart reads them,
cleanup removes them, archive keeps them readable, a missing one fences the run. Both worlds."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.blobs import flows
from tests.blobs.stores import blobs_of, event_bytes, remove_blob, stored
from tests.hostile.flows import count
from tests.runtime.harness import Engine, wait_for
from wayline.errors import BlobMissingError, CorruptLogError
from wayline.world import World

MIB = flows.MIB


async def _hook_open(world: World, token: str) -> bool:
    hook = await world.get_hook(token)
    return hook is not None and hook.active


async def test_megabytes_round_trip_and_replay_after_a_worker_restart(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "count")
    blob = "i" * (5 * MIB)
    token = f"tok-{path}"
    async with engine.worker([flows.big]):
        run = await engine.client.start(flows.big, path, blob, 20 * MIB)
        await wait_for(lambda: _hook_open(engine.world, token), timeout=60)
    # a new world (a fresh process: nothing cached) and a new worker replay the run
    world = await engine.make_world()
    client = wayline.Client(world)
    await client.resume_hook(token, "h" * (5 * MIB))
    async with engine.worker([flows.big], world=world):
        out = await client.handle(run.run_id).result(timeout=120)
    assert out == {"input": 5 * MIB, "result": 20 * MIB, "seen": 20 * MIB, "hook": 5 * MIB}
    assert count(path, "sized") == 1  # the 20 MiB result was read back, never made again
    assert await stored(world, run.run_id, "r" * (20 * MIB))
    assert await stored(world, run.run_id, "h" * (5 * MIB))
    events = await world.list_events(run.run_id)
    assert any(e.data.get("result") == "r" * (20 * MIB) for e in events)
    assert await event_bytes(world, run.run_id) < 64 * 1024  # references, not the bytes


async def test_cleanup_removes_a_runs_blobs_and_archive_keeps_them_readable(
    engine: Engine,
) -> None:
    gone, kept = "g" * (2 * MIB), "k" * (2 * MIB)
    async with engine.worker([flows.echo]):
        first = await engine.client.start(flows.echo, gone)
        assert await first.result(timeout=60) == gone
        assert await stored(engine.world, first.run_id, gone)
        assert await engine.world.delete_runs(older_than=0) == 1
        assert not await stored(engine.world, first.run_id, gone)
        assert not await stored(engine.world, first.run_id, {"args": [gone]})  # its input
        second = await engine.client.start(flows.echo, kept)
        assert await second.result(timeout=60) == kept
    assert await engine.world.archive_runs(older_than=0) == 1
    assert await stored(engine.world, second.run_id, kept)


async def test_a_missing_blob_fences_the_run_with_a_typed_error(engine: Engine) -> None:
    value = "m" * MIB
    async with engine.worker([flows.echo]):
        run = await engine.client.start(flows.echo, value)
        assert await run.result(timeout=60) == value
    await remove_blob(engine.world, run.run_id, value)
    fresh = await engine.make_world()  # nothing cached
    with pytest.raises(BlobMissingError) as info:
        await fresh.list_events(run.run_id)
    err = info.value
    assert isinstance(err, CorruptLogError) and err.code == "CORRUPT_LOG"
    assert err.run_id == run.run_id and err.seq == 3  # run_created, run_started, run_completed
    with pytest.raises(CorruptLogError):
        await fresh.get_run(run.run_id)


async def test_a_value_shaped_like_a_reference_is_stored_as_it_is(engine: Engine) -> None:
    lookalike = {"$wayline.blob": "0" * 64, "bytes": 3}
    async with engine.worker([flows.echo_any]):
        run = await engine.client.start(flows.echo_any, lookalike)
        assert await run.result(timeout=30) == lookalike
    assert (await engine.world.get_run(run.run_id)).output == lookalike  # type: ignore[union-attr]


async def test_small_payloads_stay_inline_and_a_retried_write_is_one_blob(engine: Engine) -> None:
    async with engine.worker([flows.echo]):
        run = await engine.client.start(flows.echo, "small")
        assert await run.result(timeout=30) == "small"
    assert not await stored(engine.world, run.run_id, "small")
    store = blobs_of(engine.world).store
    await store.put("r1", "a" * 64, b'"x"')
    await store.put("r1", "a" * 64, b'"x"')  # the retry: a no-op, same name
    assert await store.get("r1", "a" * 64) == b'"x"'


@pytest.mark.slow
async def test_a_64_mib_step_result(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "count")
    size = 64 * MIB - 64  # the limit is on the stored JSON (quotes included)
    async with engine.worker([flows.sized_only]):
        run = await engine.client.start(flows.sized_only, path, size)
        assert await run.result(timeout=300) == size
    assert count(path, "sized") == 1
