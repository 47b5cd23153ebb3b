"""Workflows for the fork and redrive tests. Each step body appends a line to a file (its
name and its idempotency key), so a test counts how often each body really ran; ``charge``
fails while the file ``broken`` exists, the stand-in for a bug fixed before a fork or a
redrive."""

from __future__ import annotations

import wayline
from tests.runtime.flows import mark
from tests.runtime.harness import file_exists


@wayline.step(name="fork_flows.reserve")
async def reserve(path: str, item: str) -> str:
    mark(path, f"reserve {item} {wayline.step_context().idempotency_key}")
    return f"reserved {item}"


@wayline.step(name="fork_flows.charge", max_retries=0)
async def charge(path: str, amount: int) -> str:
    mark(path, f"charge {amount} {wayline.step_context().idempotency_key}")
    if await file_exists(path + ".broken")():
        raise wayline.FatalError("card declined")
    return f"charged {amount}"


@wayline.step(name="fork_flows.ship")
async def ship(path: str) -> str:
    mark(path, f"ship {wayline.step_context().idempotency_key}")
    return "shipped"


@wayline.workflow(name="fork_flows.order")
async def order(path: str) -> list[str]:
    """reserve twice, then charge, then ship: ``reserve#2`` is the second reservation."""
    done = [await reserve(path, "book"), await reserve(path, "pen")]
    done.append(await charge(path, 12))
    done.append(await ship(path))
    return done


@wayline.workflow(name="fork_flows.nap_order")
async def nap_order(path: str) -> list[str]:
    """A completed sleep before the fork point: the fork reuses it as recorded."""
    first = await reserve(path, "book")
    await wayline.sleep(0.05)
    return [first, await charge(path, 5)]
