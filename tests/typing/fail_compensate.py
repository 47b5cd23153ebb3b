"""Must fail ``mypy --strict``: a compensation that cannot take the forward step's arguments
(it is called with them when the run unwinds)."""

from __future__ import annotations

import wayline


def refund_order(order_id: str) -> None:
    pass


def refund_cents(order_id: str, cents: str) -> None:
    pass


async def release(sku: str, count: int) -> None:
    pass


@wayline.step(compensate=refund_order)  # E: Argument 1 to "__call__" of "CompensatedStepDecorator" has incompatible type
async def charge(order_id: str, amount: int) -> str:
    return order_id


@wayline.step(compensate=refund_cents, max_retries=1)  # E: Argument 1 to "__call__" of "CompensatedStepDecorator" has incompatible type
def charge_sync(order_id: str, amount: int) -> str:
    return order_id


@wayline.step(compensate=release)  # E: Argument 1 to "__call__" of "CompensatedStepDecorator" has incompatible type
async def reserve(sku: str) -> None:
    pass
