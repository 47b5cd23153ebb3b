"""A step that says it needs longer than the invocation bound (``timeout=``). Its own module so
that the other fencing tests import where ``timeout=`` does not exist."""

from __future__ import annotations

import time

import wayline
from tests.runtime.fencing_flows import _body


@wayline.step(timeout="5s", max_retries=0)
async def long_step(path: str, seconds: float) -> str:
    await _body(path, "long", seconds)
    return "long done"


@wayline.workflow
async def long_run(path: str, seconds: float) -> str:
    return str(await long_step(path, seconds))


@wayline.step(timeout="1s", max_retries=2, retry_delay=0.2)
async def slow_once(path: str, seconds: float) -> str:
    attempt = wayline.step_context().attempt
    await _body(path, "slow", seconds if attempt == 1 else 0.1)
    return f"attempt {attempt}"


@wayline.workflow
async def past_its_timeout(path: str, seconds: float) -> str:
    return str(await slow_once(path, seconds))


@wayline.step(timeout="1s", max_retries=2, retry_delay=0.2)
def slow_once_in_a_thread(seconds: float) -> str:
    attempt = wayline.step_context().attempt
    time.sleep(seconds if attempt == 1 else 0.01)
    return f"attempt {attempt}"


@wayline.workflow
async def thread_past_its_timeout(seconds: float) -> str:
    return str(await slow_once_in_a_thread(seconds))
