"""Workflows that continue as new, for ``test_continue_as_new`` (names unique to it)."""

from __future__ import annotations

import wayline


@wayline.step(name="can_add")
async def can_add(total: int, n: int) -> int:
    return total + n


@wayline.workflow(name="can_counter")
async def can_counter(n: int, total: int, last: int) -> dict[str, int]:
    """Adds ``n`` to ``total`` in a step, then continues with ``n + 1`` until ``last``."""
    total = await can_add(total, n)
    if n < last:
        wayline.set_attributes(Reached=n)
        wayline.continue_as_new(n + 1, total, last)
    return {"n": n, "total": total}


@wayline.workflow(name="can_then_sleeps")
async def can_then_sleeps(continued: bool) -> str:
    """Continues once, then sleeps for an hour (to be cancelled)."""
    if not continued:
        wayline.continue_as_new(True)
    await wayline.sleep("1h")
    return "woke"


@wayline.workflow(name="can_catches")
async def can_catches(continued: bool) -> str:
    """An ``except Exception`` around the continue does not swallow it."""
    if continued:
        return "second"
    try:
        wayline.continue_as_new(continued=True)
    except Exception:
        return "swallowed"


@wayline.workflow(name="can_kid")
async def can_kid() -> str:
    await wayline.sleep("1h")
    return "kid"


@wayline.workflow(name="can_with_child")
async def can_with_child() -> str:
    """Continues while its child still runs: refused with a clear error."""
    wayline.child(can_kid)
    await wayline.sleep("1s")
    wayline.continue_as_new()
