"""Must pass ``mypy --strict``: every duration takes seconds, a ``timedelta`` or a string."""

from __future__ import annotations

from datetime import timedelta
from typing import assert_type

import wayline
import wayline.testing


@wayline.workflow
async def nap() -> str:
    await wayline.sleep("1h30m")
    await wayline.sleep(timedelta(minutes=5))
    await wayline.sleep(0.5)
    return "awake"


async def durations(client: wayline.Client) -> None:
    handle = await client.start(nap)
    assert_type(await handle.result(timeout="50ms"), str)
    assert_type(await handle.result(timeout=timedelta(seconds=5)), str)
    assert_type(await handle.result(timeout=10), str)
    assert_type(await handle.result(timeout=2.5), str)
    assert_type(await handle.result(timeout=None), str)
    await client.wait_for_hook("t", timeout=timedelta(seconds=1))
    wayline.testing.Environment([nap], check_interval="5ms")
    wayline.testing.Environment([nap], check_interval=timedelta(milliseconds=5))
