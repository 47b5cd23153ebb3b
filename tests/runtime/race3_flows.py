"""Workflows for the third round of adversarial race tests: ``gather``/``any`` with a failing
branch, a cancel or a worker's death; a hook taking several payloads; a cancel recorded while
the next step is being decided or its queued message is being started. Every body writes
``NAME-start`` / ``NAME-end`` lines with a wall-clock stamp (``adversarial_flows.stamp``), so
overlap and order survive the process that ran them."""

from __future__ import annotations

import asyncio
import time

import wayline
from tests.runtime.adversarial_flows import stamp
from tests.runtime.flows import mark


async def r3_refund_a(path: str, seconds: float) -> None:
    stamp(path, "refund_a-start")
    stamp(path, "refund_a-end")


@wayline.step(compensate=r3_refund_a, max_retries=3, retry_delay=0.05)
async def r3_charge_a(path: str, seconds: float) -> str:
    stamp(path, "charge_a-start")
    try:
        await asyncio.sleep(seconds)
    finally:
        stamp(path, "charge_a-end")
    return "a"


async def r3_refund_b(path: str, seconds: float) -> None:
    stamp(path, "refund_b-start")
    stamp(path, "refund_b-end")


@wayline.step(compensate=r3_refund_b, max_retries=3, retry_delay=0.05)
def r3_charge_b(path: str, seconds: float) -> str:
    """A sync (thread) body: nothing can cut it off once it runs."""
    stamp(path, "charge_b-start")
    time.sleep(seconds)
    stamp(path, "charge_b-end")
    return "b"


async def r3_refund_q(path: str, seconds: float) -> None:
    stamp(path, "refund_q-start")
    stamp(path, "refund_q-end")


@wayline.step(compensate=r3_refund_q, timeout="30s", max_retries=0)
async def r3_charge_q(path: str, seconds: float) -> str:
    """A queued (``timeout=``) step: its body runs under a step message, never inline."""
    stamp(path, "charge_q-start")
    try:
        await asyncio.sleep(seconds)
    finally:
        stamp(path, "charge_q-end")
    return "q"


@wayline.step(max_retries=0)
async def r3_boom(path: str, seconds: float) -> str:
    stamp(path, "boom-start")
    await asyncio.sleep(seconds)
    stamp(path, "boom-end")
    raise wayline.FatalError("declined")


@wayline.workflow
async def r3_gather_fail(path: str, seconds: float) -> list[str]:
    """One branch fails while the other (inline, async) still charges."""
    return await wayline.gather(r3_charge_a(path, seconds), r3_boom(path, 0.05))


@wayline.workflow
async def r3_gather_queued_fail(path: str, seconds: float) -> list[str]:
    """One branch fails while a queued branch still charges on a step message."""
    return await wayline.gather(r3_charge_q(path, seconds), r3_boom(path, 0.3))


@wayline.workflow
async def r3_gather_two(path: str, seconds: float) -> str:
    """Two charges side by side (one async, one sync), then a hook to hold the run."""
    a, b = await wayline.gather(r3_charge_a(path, seconds), r3_charge_b(path, seconds))
    await wayline.create_hook(f"r3-two:{path}")
    return f"{a}{b}"


@wayline.workflow
async def r3_any_then_fail(path: str, seconds: float) -> str:
    """``any`` returns on the fast branch while the slow charge runs on; the workflow then
    fails: the charge's refund must wait for the charge, and run once."""
    won = await wayline.any(r3_boom(path, 0.05), r3_fast(path), r3_charge_a(path, seconds))
    raise wayline.FatalError(f"after {won}")


@wayline.step(max_retries=0)
async def r3_fast(path: str) -> str:
    stamp(path, "fast-start")
    stamp(path, "fast-end")
    return "fast"


@wayline.workflow
async def r3_payloads(path: str, token: str, n: int) -> list[int]:
    hook = wayline.create_hook(token, type=int)
    got: list[int] = []
    async for value in hook:
        got.append(value)
        await r3_note(path, f"got {value}")
        if len(got) == n:
            break
    return got


@wayline.step
async def r3_note(path: str, text: str) -> str:
    mark(path, text)
    return text


async def r3_refund_c(path: str) -> None:
    stamp(path, "refund_c-start")
    stamp(path, "refund_c-end")


@wayline.step(compensate=r3_refund_c, max_retries=0)
async def r3_charge_c(path: str) -> str:
    stamp(path, "charge_c-start")
    stamp(path, "charge_c-end")
    return "c"


@wayline.workflow
async def r3_hook_then_charge(path: str, token: str) -> str:
    """A charge, a hook, then a second charge decided on the hook's payload: a cancel that
    reaches the log before that decision is written must keep the second charge from
    starting."""
    await r3_charge_a(path, 0.0)
    await wayline.create_hook(token)
    return await r3_charge_c(path)


@wayline.workflow
async def r3_hook_then_queued(path: str, token: str) -> str:
    """A hook, then a queued (``timeout=``) charge: a cancel recorded before its step message
    starts it must keep it from starting."""
    await wayline.create_hook(token)
    return await r3_charge_q(path, 0.0)
