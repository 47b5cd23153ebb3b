"""A separate process that resumes one hook under delivery ids ``d-0 .. d-{n-1}``, each at a
wall-clock instant shared with the other callers, so the calls of several processes collide:
``python -m tests.runtime.race_caller WORLD_URL TOKEN N START_AT``."""

from __future__ import annotations

import asyncio
import sys
import time

import wayline


async def main(url: str, token: str, count: int, start_at: float) -> None:
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        for i in range(count):
            await asyncio.sleep(max(0.0, start_at + i * 0.05 - time.time()))
            await client.resume_hook(token, i, delivery_id=f"d-{i}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
