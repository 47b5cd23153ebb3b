"""Workflows for the pause tests: each marks a file as its bodies run, so a test can tell
what started while the run was paused."""

from __future__ import annotations

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import file_exists, wait_for


@wayline.step
async def slow_step(path: str, name: str, hold: str) -> str:
    """Marks its start, runs until the file ``hold`` exists, then marks its end."""
    mark(path, f"{name}-start")
    await wait_for(file_exists(hold), timeout=60)
    mark(path, f"{name}-end")
    return name


@wayline.step
async def quick_step(path: str, name: str) -> str:
    mark(path, name)
    return name


@wayline.workflow
async def two_steps(path: str, hold: str) -> list[str]:
    first = await slow_step(path, "a", hold)
    second = await quick_step(path, "b")
    return [first, second]


@wayline.workflow
async def nap_then_step(path: str, seconds: float) -> str:
    await wayline.sleep(seconds)
    return await quick_step(path, "after-sleep")


@wayline.workflow
async def step_then_hook(path: str, hold: str, token: str) -> object:
    await slow_step(path, "a", hold)
    return await wayline.create_hook(token)


@wayline.step(retry=wayline.RetryPolicy(max_attempts=2, initial=0.05, on_exhausted="pause"))
async def call_provider(path: str, fixed: str) -> str:
    """Fails until the file ``fixed`` exists (the outside world is fixed)."""
    mark(path, f"try-{wayline.step_context().attempt}")
    if not lines(fixed):
        raise RuntimeError("provider down")
    return "charged"


@wayline.workflow
async def charge(path: str, fixed: str) -> str:
    return await call_provider(path, fixed)


@wayline.workflow
async def pause_kid(path: str) -> str:
    return await quick_step(path, "kid")


@wayline.workflow
async def step_then_child(path: str, hold: str) -> str:
    await slow_step(path, "a", hold)
    return await wayline.child(pause_kid, path)


@wayline.step(retry=wayline.RetryPolicy(max_attempts=1, on_exhausted="pause"))
async def fails_when_released(path: str, hold: str) -> str:
    """Marks its start, waits for ``hold``, then fails: its one attempt is spent."""
    mark(path, "f-start")
    await wait_for(file_exists(hold), timeout=60)
    raise RuntimeError("provider down")


@wayline.workflow
async def cancelled_while_exhausting(path: str, hold: str) -> str:
    return await fails_when_released(path, hold)
