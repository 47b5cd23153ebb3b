"""Must pass ``mypy --strict``: a fork answers a handle, on the client and on a handle, and a
redrive names the step it runs again."""

from __future__ import annotations

from typing import Any, assert_type

import wayline


@wayline.step(name="typing_fork.charge")
async def charge(order: str) -> str:
    return order


@wayline.workflow(name="typing_fork.checkout")
async def checkout(order: str) -> str:
    return await charge(order)


async def command(client: wayline.Client) -> None:
    handle = await client.start(checkout, "o-1")
    assert_type(
        await client.fork(handle.run_id, from_step="typing_fork.charge#1"), wayline.RunHandle[Any]
    )
    assert_type(await handle.fork("typing_fork.charge", id="o-1-again"), wayline.RunHandle[Any])
    redrive = await client.redrive(handle.run_id, "provider is back", by="alice")
    assert_type(redrive.step, str)
    assert_type((await handle.redrive(by="bob")).step_id, str)
