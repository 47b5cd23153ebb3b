"""Must pass ``mypy --strict``: a compensation that takes the forward step's arguments."""

from __future__ import annotations

from typing import Any, assert_type

import wayline
from wayline import StepDefinition


def refund(order_id: str, amount: int) -> None:
    print(wayline.step_context().forward_result)


async def release(sku: str, *, quantity: int = 1) -> bool:
    return True


def undo_anything(*args: Any, **kwargs: Any) -> None:
    pass


@wayline.step(compensate=refund, max_retries=2)
async def charge(order_id: str, amount: int) -> str:
    return order_id


@wayline.step(compensate=release)
def reserve(sku: str, *, quantity: int = 1) -> list[str]:
    return [sku] * quantity


@wayline.step
async def refund_step(order_id: str, amount: int) -> None:
    pass


@wayline.step(compensate=refund_step)
async def charge_again(order_id: str, amount: int) -> int:
    return amount


@wayline.step(compensate=undo_anything)
async def anything(order_id: str) -> int:
    return 1


@wayline.workflow
async def order(order_id: str) -> None:
    declared: StepDefinition[[str, int], str] = charge
    print(declared)
    assert_type(await charge(order_id, 12), str)
    assert_type(await reserve("BOOK", quantity=2), list[str])
    assert_type(await charge_again(order_id, 3), int)
    assert_type(await anything(order_id), int)
