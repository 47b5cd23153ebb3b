"""A second application for the adversarial CLI tests: its own workflow, its own workers."""

from __future__ import annotations

import wayline


@wayline.step
async def adv_b_echo(value: int) -> int:
    return value


@wayline.workflow
async def adv_b_flow(n: int) -> int:
    total = 0
    for i in range(n):
        total += await adv_b_echo(i)
    return total
