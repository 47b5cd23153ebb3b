"""Must fail ``mypy --strict``: a ``gather``/``race``/``any`` result used as another type."""

from __future__ import annotations

import wayline


@wayline.step
async def count(sku: str) -> int:
    return len(sku)


@wayline.step
def label(sku: str) -> str:
    return sku


@wayline.workflow
async def order(sku: str) -> None:
    n, text = await wayline.gather(count(sku), label(sku))
    wrong: str = n  # E: Incompatible types in assignment (expression has type "int", variable has type "str")
    one, two, three = await wayline.gather(count(sku), label(sku))  # E: Need more than 2 values to unpack (3 expected)
    index, value = await wayline.race(count(sku), label(sku))
    size: int = value  # E: Incompatible types in assignment (expression has type "int | str", variable has type "int")
    first: str = await wayline.any(count(sku), count(sku))  # E: Argument 1 to "any" has incompatible type "Awaitable[int]"; expected "Awaitable[str]"
    await wayline.gather(count(sku), 3)  # E: No overload variant of "gather" matches argument types
    print(wrong, text, one, two, three, index, size, first)
