"""A step body's own task scopes: an ``asyncio.timeout()`` or a ``TaskGroup`` that a body
enters before its first ``await`` belongs to the body's task, so its timeout or its failed
child cancels the body (which may catch it), never the worker's handler of the delivery."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline


@wayline.step(name="body_scopes_timeout_step")
async def guarded() -> str:
    try:
        async with asyncio.timeout(0.1):
            await asyncio.sleep(2)
    except TimeoutError:
        return "fallback"
    return "ran past its own timeout"


@wayline.workflow(name="body_scopes_timeout_wf")
async def timed() -> str:
    return await guarded()


async def _boom() -> None:
    await asyncio.sleep(0.05)
    raise ValueError("child failed")


@wayline.step(name="body_scopes_group_step")
async def grouped() -> str:
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(_boom())
            group.create_task(asyncio.sleep(1))
    except ExceptionGroup as errors:
        if errors.subgroup(ValueError) is not None:
            return "handled"
        raise
    return "no error"


@wayline.workflow(name="body_scopes_group_wf")
async def gathered() -> str:
    return await grouped()


async def test_a_timeout_a_body_enters_before_its_first_await_cancels_the_body(
    engine: Any,
) -> None:
    async with engine.worker([timed]):
        handle = await engine.client.start(timed)
        assert await handle.result(timeout=30) == "fallback"


async def test_a_task_group_a_body_enters_before_its_first_await_fails_into_the_body(
    engine: Any,
) -> None:
    async with engine.worker([gathered]):
        handle = await engine.client.start(gathered)
        assert await handle.result(timeout=30) == "handled"
