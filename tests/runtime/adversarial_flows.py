"""Workflows for the adversarial race tests. Every body writes ``start``/``end`` lines (with a
monotonic timestamp) to a file, so overlap and order survive the process that ran them."""

from __future__ import annotations

import asyncio
import time

import wayline
from tests.runtime.flows import lines, mark

__all__ = ["lines", "mark"]


def stamp(path: str, text: str) -> None:
    mark(path, f"{text} {time.time():.6f}")


def spans(path: str, name: str) -> list[tuple[float, float | None]]:
    """``(start, end)`` of each execution of ``name`` (end None: never finished)."""
    out: list[tuple[float, float | None]] = []
    for line in lines(path):
        what, _, at = line.rpartition(" ")
        if what == f"{name}-start":
            out.append((float(at), None))
        elif what == f"{name}-end":
            for i in range(len(out) - 1, -1, -1):
                if out[i][1] is None:
                    out[i] = (out[i][0], float(at))
                    break
    return out


def overlapping(path: str, name: str) -> bool:
    done = spans(path, name)
    for i, (s1, e1) in enumerate(done):
        for s2, e2 in done[i + 1 :]:
            end1 = e1 if e1 is not None else float("inf")
            end2 = e2 if e2 is not None else float("inf")
            if s1 < end2 and s2 < end1:
                return True
    return False


def refund_sync(path: str, seconds: float) -> None:
    stamp(path, "refund-start")
    stamp(path, "refund-end")


@wayline.step(compensate=refund_sync, max_retries=3, retry_delay=0.05)
def charge_sync(path: str, seconds: float) -> str:
    """A sync (thread) body: nothing can cancel it once it runs."""
    stamp(path, "charge-start")
    time.sleep(seconds)
    stamp(path, "charge-end")
    return "charged"


@wayline.workflow
async def adv_sync_charge(path: str, seconds: float) -> str:
    charged = await charge_sync(path, seconds)
    await wayline.create_hook(f"adv-sync:{path}")
    return str(charged)


async def refund_async(path: str, seconds: float) -> None:
    stamp(path, "refund-start")
    await asyncio.sleep(0)
    stamp(path, "refund-end")


@wayline.step(compensate=refund_async, max_retries=3, retry_delay=0.05)
async def charge_async(path: str, seconds: float) -> str:
    stamp(path, "charge-start")
    await asyncio.sleep(seconds)
    stamp(path, "charge-end")
    return "charged"


@wayline.workflow
async def adv_async_charge(path: str, seconds: float) -> str:
    charged = await charge_async(path, seconds)
    await wayline.create_hook(f"adv-async:{path}")
    return str(charged)


@wayline.step
async def adv_note(path: str, text: str) -> str:
    mark(path, text)
    return text


@wayline.workflow
async def adv_hook_or_timeout(path: str, token: str) -> str:
    try:
        got = await wayline.create_hook(token, timeout="1h")
    except wayline.HookTimeout:
        outcome = "timed out"
    else:
        outcome = f"got {got}"
    await adv_note(path, f"{token} {outcome}")
    return outcome
