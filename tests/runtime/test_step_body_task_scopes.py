"""A step body's own task scopes: an ``asyncio.timeout()`` or a ``TaskGroup`` that a body
enters before its first ``await`` belongs to the body's task, so its timeout or its failed
child cancels the body (which may catch it), never the worker's handler of the delivery."""

from __future__ import annotations

import asyncio
import contextvars
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


# --- the body's own task from its first line: a cancel of it, its identity, its context ----
_scopes_var: contextvars.ContextVar[str] = contextvars.ContextVar(
    "body_scopes_var", default="unset"
)


@wayline.step(name="body_scopes_self_cancel_step")
async def cancels_itself() -> str:
    task = asyncio.current_task()
    assert task is not None
    task.cancel()  # before its first await: its own task, whose cancel comes at that await
    try:
        await asyncio.sleep(2)
    except asyncio.CancelledError:
        task.uncancel()
        return "caught"
    return "not cancelled"


@wayline.workflow(name="body_scopes_self_cancel_wf")
async def self_cancelled() -> str:
    return await cancels_itself()


@wayline.step(name="body_scopes_same_task_step")
async def same_task() -> bool:
    first = asyncio.current_task()
    await asyncio.sleep(0.01)
    return asyncio.current_task() is first


@wayline.step(name="body_scopes_sets_var_step")
async def sets_var() -> str:
    _scopes_var.set("set by a body")
    return _scopes_var.get()


@wayline.step(name="body_scopes_reads_var_step")
async def reads_var() -> str:
    return _scopes_var.get()


@wayline.workflow(name="body_scopes_identity_wf")
async def identity_and_context() -> list[Any]:
    return [await same_task(), await sets_var(), await reads_var()]


@wayline.step(name="body_scopes_raises_step", max_retries=0)
async def raises_at_once() -> None:
    raise wayline.FatalError("refused before any await")


@wayline.workflow(name="body_scopes_raises_wf")
async def raised() -> str:
    try:
        await raises_at_once()
    except wayline.StepFailedError as err:
        return f"caught: {err.error['message']}"
    return "not reached"


async def test_a_cancel_of_its_own_task_before_its_first_await_reaches_the_body(
    engine: Any,
) -> None:
    async with engine.worker([self_cancelled]):
        handle = await engine.client.start(self_cancelled)
        assert await handle.result(timeout=30) == "caught"


async def test_a_bodys_task_stays_the_same_and_its_context_variables_its_own(
    engine: Any,
) -> None:
    """The task current in a body's first line is the one it resumes in after its first
    ``await``, and what a body sets in a context variable is not seen by the next step."""
    async with engine.worker([identity_and_context]):
        handle = await engine.client.start(identity_and_context)
        assert await handle.result(timeout=30) == [True, "set by a body", "unset"]


async def test_an_error_a_body_raises_before_its_first_await_fails_the_step(
    engine: Any,
) -> None:
    async with engine.worker([raised]):
        handle = await engine.client.start(raised)
        assert await handle.result(timeout=30) == "caught: refused before any await"
