"""Must pass ``mypy --strict``, deprecations reported: ``start_with`` and ``child_with`` keep the
workflow's argument and result types, and a workflow parameter named as an old option keyword
(``queue``, ``id``, ``run_id``, ``timeout``) is an argument of the plain ``start``/``child``."""

# mypy: enable-error-code="deprecated"

from __future__ import annotations

from typing import Any, assert_type

import wayline
from wayline import ChildOptions, Client, RunHandle, StartOptions


@wayline.workflow
async def kid(n: int, timeout: float) -> int:
    return n


@wayline.workflow
async def routed(order_id: str, queue: str, id: int, run_id: str) -> str:
    return order_id


@wayline.workflow
async def parent(order_id: str) -> int:
    within = await wayline.child_with(ChildOptions(timeout="1h"), kid, 1, 2.0)
    assert_type(within, int)
    assert_type(await wayline.child_with(ChildOptions(), kid, n=1, timeout=2.0), int)
    assert_type(await wayline.child(kid, 1, timeout=2.0), int)  # the child's own timeout
    return within


async def start(client: Client) -> None:
    options = StartOptions(id="order-123", id_conflict="fail", id_reuse="allow_duplicate")
    handle = await client.start_with(options, routed, "o-1", "eu", 7, "r")
    assert_type(handle, RunHandle[str])
    pinned = StartOptions(run_id="wf_" + "0" * 32, queue="eu", memo={"owner": "billing"})
    assert_type(await client.start_with(pinned, parent, "o-1"), RunHandle[int])
    assert_type(await client.start_with(StartOptions(), "parent", 1, x=2), RunHandle[Any])
    plain = await client.start(routed, "o-1", queue="eu", id=7, run_id="r")  # its arguments
    assert_type(plain, RunHandle[str])
