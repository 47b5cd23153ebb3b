"""Rate limits: at most five notifications a second per user, across every worker.

    python examples/rate_limit.py

``@wayline.step(rate_limit=wayline.RateLimit(key=lambda user, text: user, rate="5/s",
burst=1))``: the step's delivery takes a token of its user's bucket in the world before its
attempt starts. A notification that finds none waits without spending an attempt until the
next token is due, and its run shows ``blocked`` with ``waitingFor: rate_limit`` and when.
Another user's bucket is apart, so she is not held up.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import wayline

SENT: list[tuple[str, float]] = []


@wayline.step(
    name="examples.send_notification",
    rate_limit=wayline.RateLimit(key=lambda user, text: user, rate="5/s", burst=1),
)
async def send_notification(user: str, text: str) -> str:
    SENT.append((user, time.monotonic()))
    return f"sent {text!r} to {user}"


@wayline.workflow(name="examples.notify_user")
async def notify_user(user: str, text: str) -> str:
    return await send_notification(user, text)


async def main() -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [notify_user]):
            client = wayline.Client(world)
            handles = [await client.start(notify_user, "ana", f"n{i}") for i in range(4)]
            handles.append(await client.start(notify_user, "bob", "hello"))
            for handle in handles:
                await handle.result(timeout=60)
    return SENT


if __name__ == "__main__":
    start = None
    for user, at in asyncio.run(main()):
        start = at if start is None else start
        print(f"{at - start:5.2f}s  notified {user}")
