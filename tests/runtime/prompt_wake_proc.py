"""A worker process for the prompt wake crash test: ``python -m tests.runtime.prompt_wake_proc
URL MARK`` serves ``prompt_wake_flows.pw_sleepy`` with prompt wakes of up to 5 s, prints
``worker ready``, writes the file ``MARK`` once it waits in process for a sleep of a run it
drives, and runs until killed."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import wayline
from tests.runtime.harness import settings
from tests.runtime.prompt_wake_flows import pw_sleepy


async def _worker(url: str, mark: Path) -> None:
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, [pw_sleepy], settings=settings(prompt_wake_seconds=5.0))
        await worker.start()
        print("worker ready", flush=True)
        marked = asyncio.ensure_future(_mark(worker, mark))
        try:
            await worker.run()
        finally:
            marked.cancel()


async def _mark(worker: wayline.Worker, mark: Path) -> None:
    while not worker.handler.prompt_wakes.prompt:  # noqa: ASYNC110 - a counter, no event
        await asyncio.sleep(0.01)
    mark.write_text("waiting")  # noqa: ASYNC240 - a tiny local marker file


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_worker(sys.argv[1], Path(sys.argv[2])))
