"""Workflows for the console's tests: a run that completes, one that waits on a typed hook, one
whose step waits for a marker file (so a test can watch it complete), one that writes a
stream, and one that sleeps until it is cancelled."""

from __future__ import annotations

import asyncio
import os

import pydantic

import wayline


class Approval(pydantic.BaseModel):
    approved: bool
    by: str


@wayline.step
async def hello(name: str) -> str:
    return f"hello {name}"


@wayline.workflow
async def greet(name: str) -> str:
    return await hello(name)


@wayline.step
async def ship(order: str, by: str) -> str:
    return f"{order} shipped, approved by {by}"


@wayline.workflow
async def approve(order: str) -> str:
    approval = await wayline.create_hook(f"approve:{order}", type=Approval)
    return await ship(order, approval.by)


@wayline.step
async def wait_for_file(path: str) -> str:
    # Bounded: a test that never writes the marker fails on its own wait, not on a hung step.
    for _ in range(600):
        if os.path.exists(path):  # noqa: ASYNC240 - a tiny local marker file
            return "released"
        await asyncio.sleep(0.05)
    raise wayline.FatalError(f"{path} never appeared")


@wayline.workflow
async def gated(path: str) -> str:
    return await wait_for_file(path)


@wayline.step
async def write_lines(lines: int) -> int:
    out = wayline.stream("lines")
    for i in range(lines):
        await out.write({"line": i})
    return lines


@wayline.workflow
async def streams(lines: int) -> int:
    return await write_lines(lines)


@wayline.workflow
async def naps() -> str:
    await wayline.sleep(3600)
    return "awake"
