"""A step (or a workflow) written as a generator function (both worlds): its call is not a
value. A plain ``def`` generator step's generator was run to its end while its result was
encoded, on the worker's event loop (blocking every other run, past any timeout); it now fails
with SERIALIZATION_ERROR, as an ``async def`` generator step does, and nothing of it runs."""

from __future__ import annotations

from typing import Any

import wayline
from tests.runtime.harness import Engine

PRODUCED: list[int] = []


@wayline.step(max_retries=0)
def generator_rows(n: int) -> Any:
    for i in range(n):
        PRODUCED.append(i)
        yield i


@wayline.step(max_retries=0)
async def async_generator_rows(n: int) -> Any:
    for i in range(n):
        PRODUCED.append(i)
        yield i


@wayline.workflow
async def generator_steps(n: int) -> list[str]:
    codes = []
    for step in (generator_rows, async_generator_rows):
        try:
            await step(n)
            codes.append("completed")
        except wayline.StepFailedError as err:
            codes.append(str(err.error.get("code")))
    return codes


async def test_a_generator_step_fails_as_not_a_value_and_runs_nothing(engine: Engine) -> None:
    PRODUCED.clear()
    async with engine.worker([generator_steps]):
        handle = await engine.client.start(generator_steps, 3)
        assert await handle.result(timeout=30) == ["SERIALIZATION_ERROR"] * 2
    assert PRODUCED == []
