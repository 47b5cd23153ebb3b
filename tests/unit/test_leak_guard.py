"""The suite's guard against leaked asyncio tasks (``tests/conftest.py``): a test of
``tests/runtime`` that leaves a task pending fails, a test of a folder not yet counted clean
gets a ``LeakedTasks`` warning, and a task that ends within the grace turns is not a leak."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import LeakedTasks, check_no_pending_tasks

TESTS = Path(__file__).parent.parent


@pytest.fixture
async def leaked() -> AsyncIterator[asyncio.Task[None]]:
    """A task that would stay pending, cancelled once the test checked it."""
    task = asyncio.create_task(asyncio.Event().wait(), name="left-behind")
    yield task
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_runtime_test_that_leaves_a_task_pending_fails(
    leaked: asyncio.Task[None],
) -> None:
    before = asyncio.all_tasks() - {leaked}
    with pytest.raises(pytest.fail.Exception, match="left-behind"):
        await check_no_pending_tasks(before, "t", TESTS / "runtime" / "test_x.py")


async def test_a_test_elsewhere_that_leaves_a_task_pending_warns(
    leaked: asyncio.Task[None],
) -> None:
    before = asyncio.all_tasks() - {leaked}
    with pytest.warns(LeakedTasks, match="left-behind"):
        await check_no_pending_tasks(before, "t", TESTS / "cli" / "test_x.py")


async def test_a_task_that_ends_within_the_grace_turns_is_not_a_leak() -> None:
    before = asyncio.all_tasks()
    task = asyncio.create_task(asyncio.sleep(0), name="ending")
    await check_no_pending_tasks(before, "t", TESTS / "runtime" / "test_x.py")
    assert task.done()
