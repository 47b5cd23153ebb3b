"""Workflow code runs with no asyncio task current (``wayline._core.current.outside_any_task``):
the delivery's task is left on entry and entered again on exit, also when the block raises or
another block is entered inside it."""

from __future__ import annotations

import asyncio

import pytest

from wayline._core.current import outside_any_task


async def test_no_task_is_current_inside_and_the_delivery_task_is_back_after() -> None:
    task = asyncio.current_task()
    assert task is not None
    with outside_any_task():
        assert asyncio.current_task() is None
        with outside_any_task():  # a replay fed from inside a workflow's step of another
            assert asyncio.current_task() is None
        assert asyncio.current_task() is None
    assert asyncio.current_task() is task


async def test_the_task_is_entered_again_when_the_block_raises() -> None:
    task = asyncio.current_task()
    with pytest.raises(KeyError), outside_any_task():
        raise KeyError("workflow code failed")
    assert asyncio.current_task() is task


def test_outside_any_loop_it_does_nothing() -> None:
    with outside_any_task(), pytest.raises(RuntimeError):
        asyncio.get_running_loop()
