"""Must fail ``mypy --strict``: a workflow must be an ``async def``."""

from __future__ import annotations

import wayline


@wayline.workflow  # E: Argument 1 to "workflow" has incompatible type
def not_async(n: int) -> int:
    return n


@wayline.workflow(revision=2)  # E: has incompatible type
def not_async_either(n: int) -> int:
    return n
