"""The small workflows whose recorded logs are the planner's golden histories.

``tools/record_golden.py`` runs them on an embedded world and writes their logs, with the
planner's answers, to ``tests/golden/decisions.jsonl``; ``tests/unit/test_golden_decisions.py``
replays each log against these definitions and asks the planner again. Changing one of them
changes what its histories replay to: record again on purpose, and say why in the commit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import wayline

FLAKY_ATTEMPTS: dict[str, int] = {}
"""How many times ``flaky`` ran per key: it fails its first attempt only."""
REFUND_FAILURES: dict[str, int] = {}
"""How many refunds still fail per trip: the recorder sets it before each saga run."""


@wayline.step(name="golden.first")
def first(key: str) -> str:
    return f"first-{key}"


@wayline.step(name="golden.second")
def second(key: str) -> str:
    return f"second-{key}"


@wayline.workflow(name="golden.pair")
async def pair(key: str) -> list[str]:
    return [await first(key), await second(key)]


@wayline.workflow(name="golden.pair")
async def pair_reordered(key: str) -> list[str]:
    """Another deploy's ``golden.pair``: the second step first (a divergence)."""
    return [await second(key), await first(key)]


@wayline.step(name="golden.flaky", max_retries=2, retry_delay="50ms")
def flaky(key: str) -> str:
    FLAKY_ATTEMPTS[key] = FLAKY_ATTEMPTS.get(key, 0) + 1
    if FLAKY_ATTEMPTS[key] == 1:
        raise wayline.RetryableError("the first try fails", retry_after="50ms")
    return f"flaky-{key}"


@wayline.workflow(name="golden.retrying")
async def retrying(key: str) -> str:
    return await flaky(key)


def unreserve(key: str) -> None:
    """The reservation's reversal: always succeeds."""


@wayline.step(name="golden.reserve", compensate=unreserve)
def reserve(key: str) -> str:
    return f"R-{key}"


def refund(key: str) -> None:
    left = REFUND_FAILURES.get(key, 0)
    if left > 0:
        REFUND_FAILURES[key] = left - 1
        raise wayline.FatalError("the refund desk is closed")


@wayline.step(name="golden.charge", compensate=refund)
def charge(key: str) -> str:
    return f"C-{key}"


@wayline.step(name="golden.ship", max_retries=0)
def ship(key: str) -> str:
    raise wayline.FatalError("nothing to ship")


@wayline.workflow(name="golden.saga")
async def saga(key: str) -> str:
    await reserve(key)
    await charge(key)
    return await ship(key)


@wayline.step(name="golden.after_hook")
def after_hook(payload: str) -> str:
    return f"got-{payload}"


@wayline.workflow(name="golden.approval")
async def approval(token: str) -> str:
    payload = await wayline.create_hook(token)
    return await after_hook(str(payload))


@wayline.workflow(name="golden.nap")
async def nap(key: str) -> str:
    await wayline.sleep("1s")
    return await first(key)


@wayline.workflow(name="golden.kid")
async def kid(key: str) -> str:
    return await second(key)


@wayline.workflow(name="golden.parent")
async def parent(key: str) -> str:
    got = await wayline.child(kid, key)
    return await first(got)


SLOW_STARTED: dict[str, asyncio.Event] = {}
SLOW_GO: dict[str, asyncio.Event] = {}


@wayline.step(name="golden.slow", compensate=unreserve)
async def slow(key: str) -> str:
    """Holds its body open until the recorder lets it go (a cancel arrives meanwhile)."""
    SLOW_STARTED.setdefault(key, asyncio.Event()).set()
    await SLOW_GO.setdefault(key, asyncio.Event()).wait()
    return f"slow-{key}"


@wayline.workflow(name="golden.cancelled")
async def cancelled(key: str) -> str:
    return await slow(key)


@wayline.workflow(name="golden.conflict_at_once")
async def conflict_at_once(token: str) -> object:
    """Waits on a token another run holds before any step: the world refuses the batch
    (``HOOK_CONFLICT``) and, with nothing to reverse, the run fails at once."""
    wayline.set_attributes(stage="awaiting-approval")
    return await wayline.create_hook(token)


@wayline.workflow(name="golden.conflict_after_a_step")
async def conflict_after_a_step(key: str, token: str) -> object:
    """Reserves, then waits on a token another run holds: the refused batch's failure begins
    the unwind, which reverses the reservation."""
    await reserve(key)
    wayline.set_attributes(stage="awaiting-approval")
    return await wayline.create_hook(token)


@wayline.workflow(name="golden.held")
async def held(key: str) -> str:
    """One slow step: the run is paused while its body runs (a delivery the pause holds)."""
    return await slow(key)


WORKFLOWS: list[wayline.WorkflowDefinition[..., Any]] = [
    pair,
    retrying,
    saga,
    approval,
    nap,
    kid,
    parent,
    cancelled,
    conflict_at_once,
    conflict_after_a_step,
    held,
]
"""What the recorder's worker serves."""
CODE: dict[str, wayline.WorkflowDefinition[..., Any]] = {"golden.pair_reordered": pair_reordered}
"""Definitions a history may name in its ``code`` to be replayed against other code than the
one it was recorded with (under the same workflow name)."""


def definition(name: str) -> wayline.WorkflowDefinition[..., Any]:
    if name in CODE:
        return CODE[name]
    return {w.name: w for w in WORKFLOWS}[name]
