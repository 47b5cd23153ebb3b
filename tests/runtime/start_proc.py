"""Processes for the start races: ``python -m tests.runtime.start_proc URL worker`` serves
``start_flows`` until killed; ``... URL start PATH START_AT ID:TAG ...`` starts each run (an id
``wf_...`` with its tag) at the wall-clock instant ``START_AT`` and prints ``ID fresh|again``
per start. With ``WAYLINE_TEST_DIE_AFTER_CREATE=1`` the starting process SIGKILLs itself
between a start's ``run_created`` and its queue message."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from typing import Any

import wayline
from tests.runtime import start_flows


async def _worker(url: str) -> None:
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, start_flows.WORKFLOWS)
        await worker.start()
        print("worker ready", flush=True)
        await worker.run()


async def _start(url: str, path: str, start_at: float, runs: list[str]) -> None:
    async with wayline.open_world(url) as world:
        if os.environ.get("WAYLINE_TEST_DIE_AFTER_CREATE") == "1":

            async def die(*args: Any, **kwargs: Any) -> Any:
                print("created", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

            world.enqueue = die  # type: ignore[method-assign]
        client = wayline.Client(world)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        for item in runs:
            run_id, _, tag = item.partition(":")
            handle = await client.start_with(
                wayline.StartOptions(run_id=run_id), start_flows.st_counted, path, tag
            )
            print(run_id, "fresh" if handle._fresh else "again", flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    url, what = sys.argv[1], sys.argv[2]
    if what == "worker":
        asyncio.run(_worker(url))
    else:
        asyncio.run(_start(url, sys.argv[3], float(sys.argv[4]), sys.argv[5:]))
