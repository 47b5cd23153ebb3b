"""Steps and helpers in a module of their own, which workflows in ``flows`` reach as module
attributes (for definition identity)."""

from __future__ import annotations

import wayline


@wayline.step(max_retries=2)
async def part_charge(amount: int) -> int:
    return amount


@wayline.step
async def part_refund(amount: int) -> int:
    return -amount


async def settle(amount: int) -> int:
    """A helper of another module of the same package, calling a step of its own module."""
    return await part_refund(amount)


class Billing:
    charge = part_charge
