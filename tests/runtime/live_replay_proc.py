"""A worker process for the live replay crash test: ``python -m tests.runtime.live_replay_proc
URL HITS`` serves ``live_replay_flows.crashy`` with live replays kept, prints ``worker ready``,
writes to the file ``HITS`` how many wakes went on from a live replay as that changes, and runs
until killed."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import wayline
from tests.runtime.harness import settings
from tests.runtime.live_replay_flows import crashy


async def _worker(url: str, hits: Path) -> None:
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, [crashy], settings=settings(replay_cache_runs=256))
        await worker.start()
        print("worker ready", flush=True)
        counted = asyncio.ensure_future(_count_hits(worker, hits))
        try:
            await worker.run()
        finally:
            counted.cancel()


async def _count_hits(worker: wayline.Worker, hits: Path) -> None:
    seen = 0
    while True:
        if worker.handler.replays.hits != seen:
            seen = worker.handler.replays.hits
            hits.write_text(str(seen))  # noqa: ASYNC240 - a tiny local marker file
        await asyncio.sleep(0.01)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_worker(sys.argv[1], Path(sys.argv[2])))
