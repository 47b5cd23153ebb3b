"""Must pass ``mypy --strict``: pause and unpause answer ``bool``, on the client and on a
handle, and a retry policy may pause its run when its attempts run out."""

from __future__ import annotations

from typing import assert_type

import wayline


@wayline.step(retry=wayline.RetryPolicy(max_attempts=3, on_exhausted="pause"))
async def charge(order: str) -> str:
    return order


@wayline.workflow
async def checkout(order: str) -> str:
    return await charge(order)


async def command(client: wayline.Client) -> None:
    handle = await client.start(checkout, "o-1")
    assert_type(await handle.pause(), bool)
    assert_type(await handle.pause("provider outage"), bool)
    assert_type(await handle.unpause(reason="provider is back"), bool)
    assert_type(await client.pause(handle.run_id, "outage", by="on-call"), bool)
    assert_type(await client.unpause(handle.run_id), bool)
