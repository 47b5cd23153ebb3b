"""The workflow ``bench/operator.py`` runs through WorkflowRuns: three no-op steps."""

from __future__ import annotations

import wayline


@wayline.step
async def bench_step(i: int) -> int:
    return i


@wayline.workflow
async def bench_three(n: int) -> int:
    total = 0
    for i in range(3):
        total += await bench_step(n + i)
    return total
