"""A step written as a generator function (both worlds). A plain ``def`` generator step's rows
were produced while its result was encoded, on the worker's event loop (a 2 s body blocked
every other run for 2 s, past any timeout): its result is now encoded in the body's thread,
so its rows are produced there, as the rest of its work. An ``async def`` generator step
fails SERIALIZATION_ERROR (what it returns is not a value), as before."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import wayline
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"

PRODUCED_ON: list[str] = []


@wayline.step(max_retries=0)
def generator_rows(n: int) -> Any:
    for i in range(n):
        PRODUCED_ON.append(threading.current_thread().name)
        yield i


@wayline.step(max_retries=0)
async def async_generator_rows(n: int) -> Any:
    for i in range(n):
        yield i


@wayline.workflow
async def generator_steps(n: int) -> list[Any]:
    out: list[Any] = [await generator_rows(n)]
    try:
        out.append(await async_generator_rows(n))
    except wayline.StepFailedError as err:
        out.append(err.error.get("code"))
    return out


async def test_a_generator_steps_rows_are_produced_in_its_thread(engine: Engine) -> None:
    PRODUCED_ON.clear()
    async with engine.worker([generator_steps]):
        handle = await engine.client.start(generator_steps, 3)
        assert await handle.result(timeout=30) == [[0, 1, 2], "SERIALIZATION_ERROR"]
    loop_thread = threading.main_thread().name
    assert len(PRODUCED_ON) == 3 and loop_thread not in PRODUCED_ON, PRODUCED_ON
