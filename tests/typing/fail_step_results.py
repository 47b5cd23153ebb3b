"""Must fail ``mypy --strict``: a step's or a run's result used as another type."""

from __future__ import annotations

import wayline


@wayline.step
async def charge(order_id: str) -> int:
    return 1


@wayline.step
def label(order_id: str) -> str:
    return order_id


@wayline.workflow
async def order(order_id: str) -> str:
    total: str = await charge(order_id)  # E: Incompatible types in assignment (expression has type "int", variable has type "str")
    size: int = await label(order_id)  # E: Incompatible types in assignment (expression has type "str", variable has type "int")
    return total + str(size)


async def run(client: wayline.Client) -> None:
    handle = await client.start(order, "o-1")
    count: int = await handle.result()  # E: Incompatible types in assignment (expression has type "str", variable has type "int")
    print(count)
