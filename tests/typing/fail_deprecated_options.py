"""Must fail ``mypy --strict`` with deprecations reported: each option given as a keyword of
``start`` or ``child`` is reported, naming the form that replaces it."""

# mypy: enable-error-code="deprecated"

from __future__ import annotations

import wayline


@wayline.workflow
async def kid(n: int) -> int:
    return n


@wayline.workflow
async def order(order_id: str) -> int:
    return await wayline.child(kid, 2, timeout="5m")  # E: use child_with(ChildOptions(timeout=), wf)


async def start(client: wayline.Client) -> None:
    await client.start(order, "o-1", run_id="wf_" + "0" * 32)  # E: use start_with(StartOptions(run_id=), wf)
    await client.start(order, "o-1", id="o-1")  # E: use start_with(StartOptions(id=), wf)
    await client.start(order, "o-1", queue="eu")  # E: use start_with(StartOptions(queue=), wf)
    await client.start("order", "o-1", id="o-1")  # E: use start_with(StartOptions(id=), name)
