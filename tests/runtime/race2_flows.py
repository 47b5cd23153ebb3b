"""Workflows for the second round of adversarial race tests (children beside worker deaths,
an async body that swallows its cancellation, ``timeout=`` steps). Every body writes
``NAME-start``/``NAME-end`` lines with a wall-clock stamp (``adversarial_flows.stamp``), so
overlap and order survive the process that ran them."""

from __future__ import annotations

import asyncio
import time

import wayline
from tests.runtime.adversarial_flows import charge_sync, stamp


async def refund_swallow(path: str, seconds: float) -> None:
    stamp(path, "refund-start")
    await asyncio.sleep(0)
    stamp(path, "refund-end")


@wayline.step(compensate=refund_swallow, max_retries=3, retry_delay=0.05)
async def charge_swallow(path: str, seconds: float) -> str:
    """An async body that swallows every cancellation and runs on to its end (user code that
    catches ``CancelledError`` around a provider call, which happens)."""
    stamp(path, "charge-start")
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            await asyncio.sleep(left)
        except asyncio.CancelledError:
            stamp(path, "swallowed")
    stamp(path, "charge-end")
    return "charged"


@wayline.workflow
async def r2_swallow(path: str, seconds: float) -> str:
    charged = await charge_swallow(path, seconds)
    await wayline.create_hook(f"r2-swallow:{path}")
    return str(charged)


async def refund_timed(path: str, seconds: float) -> None:
    stamp(path, "refund-start")
    stamp(path, "refund-end")


@wayline.step(timeout="20s", compensate=refund_timed, max_retries=3, retry_delay=0.05)
async def charge_timed(path: str, seconds: float) -> str:
    """A queued step (``timeout=``): it never runs inline."""
    stamp(path, "charge-start")
    try:
        await asyncio.sleep(seconds)
    finally:  # a body cut off ends here too: the next one may start only after this line
        stamp(path, "charge-end")
    return "charged"


@wayline.workflow
async def r2_timed(path: str, seconds: float) -> str:
    charged = await charge_timed(path, seconds)
    await wayline.create_hook(f"r2-timed:{path}")
    return str(charged)


@wayline.workflow
async def r2_kid(path: str, seconds: float) -> str:
    charged = await charge_sync(path, seconds)
    await wayline.create_hook(f"r2-kid:{path}")
    return str(charged)


@wayline.workflow
async def r2_parent(path: str, seconds: float) -> str:
    got = await wayline.child(r2_kid, path, seconds)
    return f"parent got {got}"


@wayline.step
async def r2_note(path: str, text: str) -> str:
    stamp(path, text)
    return text


@wayline.workflow
async def r2_sleepy(path: str, tag: str, seconds: float) -> str:
    await wayline.sleep(seconds)
    await r2_note(path, f"after-{tag}")
    return tag
