"""The workflow of the live replay crash test, served by ``worker_proc live-replay`` in a
process of its own and by the test's worker after that process is killed."""

from __future__ import annotations

import asyncio

import wayline
from tests.runtime import flows


@wayline.step(name="lr_crash_mark", max_retries=2, retry_delay=0.01)
async def crash_mark(path: str, i: int) -> int:
    """Marks its run; step 1 hangs on its first run, as the test kills the process under it."""
    first = f"step {i}" not in flows.lines(path)
    flows.mark(path, f"step {i}")
    if i == 1 and first:
        flows.mark(path, "hang")
        await asyncio.sleep(60)
    return i


@wayline.workflow(name="lr_crashy")
async def crashy(path: str, token: str) -> list[int]:
    """A step, then a hook, three times: each step after the first is driven by a wake."""
    out = []
    for i in range(3):
        out.append(await crash_mark(path, i))
        await wayline.create_hook(f"{token}:{i}")
    return out
