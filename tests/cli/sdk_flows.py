"""Workflows for the CLI tests of the newer SDK surface (typed hooks, wake, streams); apart
from ``flows.py`` so its listing of workflows stays as those tests expect."""

from __future__ import annotations

from dataclasses import dataclass

import wayline


@dataclass
class Go(wayline.Hook):
    approved: bool
    by: str


@wayline.workflow
async def nap_then_approve(ticket: str) -> str:
    await wayline.sleep("1h")
    go = await Go.wait(f"go:{ticket}", metadata={"ticket": ticket})
    return go.by


@wayline.step(name="cli_tests.count_up")
async def count_up(n: int) -> int:
    out = wayline.stream("progress")
    for i in range(n):
        await out.write({"done": i + 1, "of": n})
    return n


@wayline.workflow
async def counting(n: int) -> int:
    return await count_up(n)


@wayline.step(
    name="cli_tests.count_twice", retry=wayline.RetryPolicy(max_attempts=2, initial="10ms")
)
async def count_twice(n: int) -> int:
    """Writes ``n`` lines; the first attempt fails after them (its lines are then partial)."""
    out = wayline.stream("progress")
    attempt = wayline.step_context().attempt
    for i in range(n):
        await out.write({"done": i + 1, "attempt": attempt})
    if attempt == 1:
        raise RuntimeError("first attempt fails after its lines")
    return n


@wayline.workflow
async def counting_twice(n: int) -> int:
    return await count_twice(n)
