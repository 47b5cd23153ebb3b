"""Workflows with long logs, for ``test_history_limits`` (names unique to it)."""

from __future__ import annotations

import wayline
from tests.runtime.flows import mark


@wayline.step(name="hl_tick")
async def hl_tick(i: int) -> int:
    return i


@wayline.workflow(name="hl_steps")
async def hl_steps(count: int) -> int:
    """``count`` steps one after the other: about three events each."""
    total = 0
    for i in range(count):
        total += await hl_tick(i)
    return total


@wayline.workflow(name="hl_rolling")
async def hl_rolling(rounds: int, per_round: int) -> int:
    """``per_round`` steps a run, continued as new until ``rounds`` runs have done theirs."""
    for i in range(per_round):
        await hl_tick(i)
    if rounds > 1:
        wayline.continue_as_new(rounds - 1, per_round)
    return rounds


@wayline.workflow(name="hl_sleepy")
async def hl_sleepy(count: int) -> int:
    """A step, then a short sleep, ``count`` times: each wake is a delivery of its own."""
    for i in range(count):
        await hl_tick(i)
        await wayline.sleep(0.001)
    return count


@wayline.step(name="hl_undo", max_retries=2, retry_delay=0.05)
async def hl_undo(path: str, i: int) -> None:
    """Fails its first attempt, so the unwind goes on under another delivery."""
    attempt = wayline.step_context().attempt
    mark(path, f"undo {i} {attempt}")
    if attempt == 1:
        raise RuntimeError(f"hl_undo {i} fails once")


@wayline.step(name="hl_do", compensate=hl_undo)
async def hl_do(path: str, i: int) -> int:
    return i


@wayline.workflow(name="hl_unwinds")
async def hl_unwinds(path: str, count: int) -> int:
    """``count`` steps that compensate, then a failure: ``count`` reversals, each tried twice."""
    for i in range(count):
        await hl_do(path, i)
    raise wayline.FatalError("hl_unwinds fails after its steps")
