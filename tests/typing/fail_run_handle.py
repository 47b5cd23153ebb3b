"""Must fail ``mypy --strict`` on the marked lines: a handle's commands keep their types."""

from __future__ import annotations

import wayline


@wayline.workflow
async def nap(hours: int) -> str:
    return "awake"


async def command(client: wayline.Client) -> str:
    handle = await client.start(nap, 1)
    await handle.wake(3)  # E: incompatible type "int"
    said: str = await handle.cancel()  # E: Incompatible types in assignment
    await handle.resume("now")  # E: Too many arguments
    await client.wait_for_hook("t", timeout=[1])  # E: incompatible type "list[int]"
    await handle.result(timeout=[1])  # E: incompatible type "list[int]"
    return said
