"""Out-of-line payloads under pressure: non-BMP text is measured at its real JSON size (so a
batch of such values never outgrows a NATS message), writers racing on one blob never make a
reader see it missing, and the blob cache never hands one mutable object to two readers.
Both worlds."""

from __future__ import annotations

import asyncio
import hashlib
import random
from pathlib import Path

from tests.blobs import flows
from tests.blobs.stores import blobs_of, stored
from tests.runtime.harness import Engine, wait_for
from wayline.world import World
from wayline.world.blobs import _measure, dumps

MIB = flows.MIB


def test_non_bmp_text_is_measured_at_its_json_size() -> None:
    for limit in (512, 256 * 1024):
        for text in ("\N{GRINNING FACE}" * 40, flows.EMOJI, "\x00" * 100, "a\N{GRINNING FACE}"):
            size, _ = _measure(text, limit)
            assert size >= len(dumps(text)), (text[:4], limit)


async def test_a_batch_of_large_non_bmp_results_is_stowed(engine: Engine) -> None:
    async with engine.worker([flows.three_emoji]):
        run = await engine.client.start(flows.three_emoji)
        assert await run.result(timeout=60) == [40000] * 3
    assert await stored(engine.world, run.run_id, flows.EMOJI)


async def test_racing_writers_of_one_blob_never_make_it_missing(world: World) -> None:
    store = blobs_of(world).store
    data = dumps("c" * (3 * MIB))  # a dozen chunks on NATS
    digest = hashlib.sha256(data).hexdigest()
    rng = random.Random(7)
    for round_ in range(8):
        run_id = f"race-{round_}"
        landed = asyncio.Event()
        misses: list[int] = []

        async def write(delay: float, run_id: str = run_id, landed: asyncio.Event = landed) -> None:
            await asyncio.sleep(delay)
            await store.put(run_id, digest, data)
            landed.set()

        writers = asyncio.gather(*(write(rng.uniform(0, 0.04)) for _ in range(12)))
        while not writers.done():
            was_landed = landed.is_set()  # a put returned before this read began
            got = await store.get(run_id, digest)
            if was_landed and got is None:
                misses.append(round_)
            assert got is None or got == data
            await asyncio.sleep(0)  # a local store's read never suspends
        await writers
        assert misses == []
        assert await store.get(run_id, digest) == data


async def test_a_mutated_large_value_never_reaches_a_later_replay(
    engine: Engine, tmp_path: Path
) -> None:
    token, n = f"tok-{tmp_path}", 400  # 400 KiB of JSON: stowed
    async with engine.worker([flows.mutates]):
        run = await engine.client.start(flows.mutates, token, n)
        await wait_for(lambda: _hook_open(engine.world, f"{token}-1"), timeout=60)
    flows.KEPT.append("the step's caller, later")  # the object the step body returned
    await engine.client.resume_hook(f"{token}-1", 1)
    async with engine.worker([flows.mutates]):  # a fresh replay, same world (same cache)
        await wait_for(lambda: _hook_open(engine.world, f"{token}-2"), timeout=60)
    await engine.client.resume_hook(f"{token}-2", 2)
    async with engine.worker([flows.mutates]):  # and again, after the workflow mutated it
        assert await run.result(timeout=60) == [n, n + 1]
    step = [e for e in await engine.world.list_events(run.run_id) if "result" in e.data]
    assert step[0].data["result"] == ["k" * 1024] * n


async def _hook_open(world: World, token: str) -> bool:
    hook = await world.get_hook(token)
    return hook is not None and hook.active
