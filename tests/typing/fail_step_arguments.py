"""Must fail ``mypy --strict``: a step called with a missing, wrong or unknown argument."""

from __future__ import annotations

import wayline


@wayline.step
async def charge(order_id: str, amount: int) -> int:
    return amount


@wayline.step(max_retries=1)
def ship(order_id: str) -> str:
    return order_id


@wayline.workflow
async def order(order_id: str) -> int:
    await charge(order_id)  # E: Missing positional argument "amount" in call to "__call__" of "StepDefinition"
    await charge(order_id, "12")  # E: Argument 2 to "__call__" of "StepDefinition" has incompatible type "str"; expected "int"
    await ship(order_id, express=True)  # E: Unexpected keyword argument "express" for "__call__" of "StepDefinition"
    return 0
