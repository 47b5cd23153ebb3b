"""A worker process for the fairness tests across processes: ``python -m
tests.runtime.fair_worker_proc URL`` serves ``noted`` with one free slot for flows until
killed, and prints ``worker ready`` once it has started."""

from __future__ import annotations

import asyncio
import logging
import sys

import wayline


@wayline.workflow(name="fair_procs.noted")
async def noted(path: str, label: str) -> str:
    """Append ``label`` to the file ``path``: the order of the lines is the order in which the
    workers began the runs (one ``write`` of one short line on a file opened to append)."""
    with open(path, "a") as out:  # noqa: ASYNC230 - one short line on a local file
        out.write(label + "\n")
    return label


async def _worker(url: str) -> None:
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, [noted], flow_concurrency=1, recover=False)
        await worker.start()
        print("worker ready", flush=True)
        await worker.run()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_worker(sys.argv[1]))
