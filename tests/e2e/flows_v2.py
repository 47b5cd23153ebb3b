"""Version 2 of the e2e suite's ``steady`` workflow, for the WorkflowWorker rollout: one step
more (``e2e.bonus``), so its definition identity differs and a run pinned to version 1 can be
driven only by version 1's pods. Mounted beside flows.py and loaded instead of it."""

from __future__ import annotations

import wayline


@wayline.step(name="e2e.add")
def add(total: int, value: int) -> int:
    return total + value


@wayline.step(name="e2e.bonus")
def bonus(total: int) -> int:
    return total + 1000


@wayline.workflow
async def steady(rounds: int) -> int:
    """Version 1's rounds, then a bonus step: a run of version 2 ends 1000 higher."""
    total = 0
    for value in range(rounds):
        total = await add(total, value)
        await wayline.sleep("2s")
    return await bonus(total)
