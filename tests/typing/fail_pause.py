"""Must fail ``mypy --strict`` on the marked lines: ``on_exhausted`` is ``fail`` or ``pause``,
and pause and unpause take a reason, not a duration."""

from __future__ import annotations

import wayline

wayline.RetryPolicy(on_exhausted="retry")  # E: Argument "on_exhausted" to "RetryPolicy" has incompatible type


async def command(client: wayline.Client, run_id: str) -> str:
    handle = client.handle(run_id)
    await handle.pause(30)  # E: incompatible type "int"
    paused: str = await client.unpause(run_id)  # E: Incompatible types in assignment
    return paused
