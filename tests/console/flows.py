"""Workflows for the console's tests: a run that completes, one that waits on a typed hook, one
whose step waits for a marker file (so a test can watch it complete), one that writes a
stream, and one that sleeps until it is cancelled."""

from __future__ import annotations

import asyncio

import pydantic

import wayline


class Approval(pydantic.BaseModel):
    approved: bool
    by: str


@wayline.step(name="console.hello")
async def hello(name: str) -> str:
    return f"hello {name}"


@wayline.workflow(name="greet")  # explicit: other test modules have namesakes
async def greet(name: str) -> str:
    return await hello(name)


@wayline.step(name="console.ship")
async def ship(order: str, by: str) -> str:
    return f"{order} shipped, approved by {by}"


@wayline.workflow(name="approve")  # explicit: other test modules have namesakes
async def approve(order: str) -> str:
    approval = await wayline.create_hook(f"approve:{order}", type=Approval)
    return await ship(order, approval.by)


_GATES: dict[str, asyncio.Event] = {}


def release(name: str) -> None:
    """Let the step waiting on ``name`` end (the worker runs in the test's own event loop)."""
    _GATES.setdefault(name, asyncio.Event()).set()


@wayline.step(name="console.wait_for_release")
async def wait_for_release(name: str) -> str:
    # Bounded: a test that never releases the gate fails on its own wait, not on a hung step.
    try:
        await asyncio.wait_for(_GATES.setdefault(name, asyncio.Event()).wait(), 30)
    except TimeoutError:
        raise wayline.FatalError(f"gate {name} was never released") from None
    finally:
        _GATES.pop(name, None)
    return "released"


@wayline.workflow(name="gated")  # explicit: other test modules have namesakes
async def gated(name: str) -> str:
    return await wait_for_release(name)


@wayline.step(name="console.write_lines")
async def write_lines(lines: int) -> int:
    out = wayline.stream("lines")
    for i in range(lines):
        await out.write({"line": i})
    return lines


@wayline.workflow(name="streams")  # explicit: other test modules have namesakes
async def streams(lines: int) -> int:
    return await write_lines(lines)


_TRIES: dict[str, int] = {}


@wayline.step(name="console.flaky", max_retries=2, retry_delay=0.01)
async def flaky(key: str) -> str:
    _TRIES[key] = _TRIES.get(key, 0) + 1
    if _TRIES[key] == 1:
        raise RuntimeError("the card service timed out")
    return "charged"


@wayline.workflow(name="retries")  # explicit: other test modules have namesakes
async def retries(key: str) -> str:
    return await flaky(key)


@wayline.workflow(name="naps")  # explicit: other test modules have namesakes
async def naps() -> str:
    await wayline.sleep(3600)
    return "awake"
