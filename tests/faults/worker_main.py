"""A worker process for fault tests: ``python -m tests.faults.worker_main DB_PATH``.

Runs every workflow of ``tests.runtime.flows`` on the embedded world until killed."""

from __future__ import annotations

import asyncio
import logging
import sys

import wayline
from tests.runtime import flows


async def main(path: str) -> None:
    workflows = [v for v in vars(flows).values() if isinstance(v, wayline.definitions.WorkflowDefinition)]
    async with wayline.LocalWorld(path, poll_interval=0.02, visibility_seconds=30) as world:
        worker = wayline.Worker(world, workflows)
        print("worker ready", flush=True)
        await worker.run()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1]))
