"""Application A of the soak (``bench/soak.py``): workflow ``soak_a`` and its steps, none of
which application B has. Every body writes start/end markers (``markers.py``)."""

from __future__ import annotations

import asyncio

from bench.soak_apps.markers import body

import wayline


async def _undo_a(tag: str, i: int, pause: float) -> str:
    async with body(i):
        await asyncio.sleep(0.01)
    return f"undid {tag}/{i}"


@wayline.step(name="soak_a.step", max_retries=5, retry_delay="200ms", compensate=_undo_a)
async def a_step(tag: str, i: int, pause: float) -> int:
    async with body(i):
        await asyncio.sleep(pause)
    return i


@wayline.step(name="soak_a.long", max_retries=5, retry_delay="200ms", timeout="60s")
async def a_long(tag: str, i: int, pause: float) -> int:
    """Declares a timeout: never inline, queue-owned, its delivery renewed while it runs."""
    async with body(i):
        await asyncio.sleep(pause)
    return i


@wayline.workflow(name="soak_a")
async def soak_a(tag: str, plan: list[float], hook_at: int, nap: float) -> int:
    """``len(plan)`` steps (step i sleeps ``plan[i]``); a hook before step ``hook_at`` whose
    payload is added to the sum; steps 10-12 as one parallel group; step 15 queue-owned; a
    durable sleep of ``nap`` seconds before step 5 when it is positive."""
    total = 0
    i = 0
    while i < len(plan):
        if i == hook_at:
            total += int(await wayline.create_hook(token=f"soak-{tag}"))
        if i == 5 and nap > 0:
            await wayline.sleep(nap)
        if i == 10 and i + 2 < len(plan):
            parts = await wayline.gather(*(a_step(tag, j, plan[j]) for j in range(i, i + 3)))
            total += sum(parts)
            i += 3
            continue
        if i == 15:
            total += await a_long(tag, i, plan[i])
        else:
            total += await a_step(tag, i, plan[i])
        i += 1
    return total
