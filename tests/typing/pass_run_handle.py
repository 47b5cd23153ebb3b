"""Must pass ``mypy --strict``: a ``RunHandle``'s commands answer as the client's do."""

from __future__ import annotations

from typing import assert_type

import wayline


@wayline.workflow
async def nap(hours: int) -> str:
    await wayline.sleep(hours * 3600)
    return "awake"


async def command(client: wayline.Client) -> None:
    handle = await client.start(nap, 1)
    assert_type(await handle.wake(), list[str])
    assert_type(await handle.wake("w1"), list[str])
    assert_type(await handle.cancel(), bool)
    assert_type(await handle.cancel("no longer needed"), bool)
    assert_type(await handle.terminate(reason="stop"), bool)
    assert_type(await handle.resume(), bool)
    assert_type(await handle.result(), str)
    hook = await client.wait_for_hook("approve:1", timeout="10s")
    assert_type(hook, wayline.HookInfo)
    assert_type(hook.run_id, str)
