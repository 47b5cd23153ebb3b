"""Workflows for the fencing and hand-off tests. Every body writes a start line and, when it
stops (finished or cut off), an end line, with its pid and times, so a test can prove that no
two bodies of one step ever ran at the same time."""

from __future__ import annotations

import asyncio
import os
import time

import wayline
from tests.runtime.flows import mark


async def _body(path: str, key: str, seconds: float) -> None:
    attempt = wayline.step_context().attempt
    mark(path, f"start {key} {attempt} {os.getpid()} {time.time():.6f}")
    how = "cut"
    try:
        await asyncio.sleep(seconds)
        how = "end"
    finally:
        mark(path, f"{how} {key} {attempt} {os.getpid()} {time.time():.6f}")


@wayline.step(max_retries=3, retry_delay=0.2)
async def short_step(path: str, i: int, seconds: float) -> int:
    await _body(path, f"s{i}", seconds)
    return i


@wayline.workflow
async def many_short_steps(path: str, n: int, seconds: float) -> int:
    total = 0
    for i in range(n):
        total += await short_step(path, i, seconds)
    return total


@wayline.step(max_retries=3, retry_delay=0.2)
async def overruns_once(path: str, seconds: float) -> str:
    attempt = wayline.step_context().attempt
    await _body(path, "over", seconds if attempt == 1 else 0.1)
    return f"attempt {attempt}"


@wayline.workflow
async def overrun(path: str, seconds: float) -> str:
    return str(await overruns_once(path, seconds))


@wayline.step
async def sleepy(path: str, ms: int) -> int:
    await _body(path, f"d{ms}", ms / 1000)
    return ms


@wayline.step
async def after_race(path: str, winner: int) -> int:
    await _body(path, "after", 0)
    return winner


@wayline.workflow
async def race_of_sleeps(path: str) -> int:
    _, ms = await wayline.race(sleepy(path, 3000), sleepy(path, 100), sleepy(path, 6000))
    return int(await after_race(path, ms))


@wayline.step(max_retries=3, retry_delay=0.2)
async def undo_slowly(path: str, i: int, seconds: float) -> None:
    await _body(path, f"u{i}", seconds)


@wayline.step(compensate=undo_slowly)
async def do_quickly(path: str, i: int, seconds: float) -> int:
    return i


@wayline.workflow
async def long_unwind(path: str, n: int, seconds: float) -> int:
    """n quick steps, then a failure: n reversals of ``seconds`` each to run."""
    for i in range(n):
        await do_quickly(path, i, seconds)
    raise RuntimeError("long_unwind fails after its steps")
