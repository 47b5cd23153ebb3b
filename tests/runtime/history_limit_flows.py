"""Workflows with long logs, for ``test_history_limits`` (names unique to it)."""

from __future__ import annotations

import wayline


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
