"""Must fail ``mypy --strict``: a typed hook's payload used as another type."""

from __future__ import annotations

import dataclasses

import wayline


@dataclasses.dataclass
class Approval:
    approved: bool


@wayline.workflow
async def approve(order_id: str) -> bool:
    hook = wayline.create_hook(f"approve:{order_id}", type=Approval)
    said: str = await hook  # E: Incompatible types in assignment (expression has type "Approval", variable has type "str")
    async for later in hook:
        print(later.by)  # E: "Approval" has no attribute "by"
    counts = wayline.create_hook("counts", type=list[int])
    first: list[str] = await counts  # E: Incompatible types in assignment (expression has type "list[int]", variable has type "list[str]")
    print(said, first)
    return True
