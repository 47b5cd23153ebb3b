"""Application B of the soak (``bench/soak.py``): workflow ``soak_b`` and its steps, none of
which application A has. Every body writes start/end markers (``markers.py``)."""

from __future__ import annotations

import asyncio

from bench.soak_apps.markers import body

import wayline


async def _undo_b(tag: str, i: int, pause: float) -> str:
    async with body(i):
        await asyncio.sleep(0.01)
    return f"undid {tag}/{i}"


@wayline.step(name="soak_b.step", max_retries=5, retry_delay="200ms", compensate=_undo_b)
async def b_step(tag: str, i: int, pause: float) -> int:
    async with body(i):
        await asyncio.sleep(pause)
    return i


@wayline.step(name="soak_b.long", max_retries=5, retry_delay="200ms", timeout="60s")
async def b_long(tag: str, i: int, pause: float) -> int:
    """Declares a timeout: never inline, queue-owned, its delivery renewed while it runs."""
    async with body(i):
        await asyncio.sleep(pause)
    return i


@wayline.workflow(name="soak_b")
async def soak_b(tag: str, plan: list[float], hook_at: int, nap: float) -> int:
    """As ``soak_a`` with another shape: steps 4-7 as one parallel group, step 12 queue-owned,
    the durable sleep before step 9."""
    total = 0
    i = 0
    while i < len(plan):
        if i == hook_at:
            total += int(await wayline.create_hook(token=f"soak-{tag}"))
        if i == 9 and nap > 0:
            await wayline.sleep(nap)
        if i == 4 and i + 3 < len(plan):
            parts = await wayline.gather(*(b_step(tag, j, plan[j]) for j in range(i, i + 4)))
            total += sum(parts)
            i += 4
            continue
        if i == 12:
            total += await b_long(tag, i, plan[i])
        else:
            total += await b_step(tag, i, plan[i])
        i += 1
    return total
