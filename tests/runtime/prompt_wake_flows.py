"""Workflows of the prompt wake tests (``test_prompt_wakes``), in a module of their own so a
worker process (``worker_proc prompt-wake``) registers the same definitions."""

from __future__ import annotations

import wayline
from tests.runtime import flows


@wayline.step(name="pw_tick")
async def pw_tick(log: str, i: int) -> int:
    flows.mark(log, f"tick {i}")
    return i


@wayline.workflow(name="pw_sleepy")
async def pw_sleepy(log: str, count: int, seconds: float) -> list[int]:
    """A step, then a sleep of ``seconds``, ``count`` times."""
    out = []
    for i in range(count):
        out.append(await pw_tick(log, i))
        await wayline.sleep(seconds)
    return out


@wayline.workflow(name="pw_quick")
async def pw_quick() -> str:
    """Nothing to wait for: done as soon as a flow slot takes its start."""
    return "quick"
