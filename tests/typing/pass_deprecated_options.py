"""Must pass ``mypy --strict`` (deprecations not reported, as mypy's default): code written
with the options as keywords of ``start`` and ``child`` still type-checks for one more release.
(The project's own mypy settings report deprecations, so this file turns that off.)"""

# mypy: disable-error-code="deprecated"

from __future__ import annotations

from typing import Any, assert_type

import wayline
from wayline import Client, RunHandle


@wayline.workflow
async def kid(n: int) -> int:
    return n


@wayline.workflow
async def order(order_id: str, amount: int) -> str:
    assert_type(await wayline.child(kid, 2, timeout="5m"), int)
    return order_id


async def start(client: Client) -> None:
    pinned = await client.start(order, "o-1", 1250, run_id="wf_" + "0" * 32)
    assert_type(pinned, RunHandle[str])
    by_id = await client.start(order, "o-1", 1250, id="o-1", id_reuse="allow_duplicate")
    assert_type(by_id, RunHandle[str])
    queued = await client.start(order, "o-1", 1250, queue="eu")
    assert_type(queued, RunHandle[str])
    by_name = await client.start("orders", "o-1", run_id="wf_" + "0" * 32, queue="eu")
    assert_type(by_name, RunHandle[Any])
