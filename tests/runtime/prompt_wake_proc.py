"""A worker process for the prompt wake crash tests: ``python -m tests.runtime.prompt_wake_proc
URL MARK [at-cancel]`` serves ``prompt_wake_flows.pw_sleepy`` with prompt wakes of up to 5 s,
prints ``worker ready``, writes the file ``MARK`` once it waits in process for a sleep of a
run it drives (with ``at-cancel``: once it wrote a sleep's completion, before it withdraws the
sleep's delayed message, where it then stops for good), and runs until killed."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import wayline
from tests.runtime.harness import settings
from tests.runtime.prompt_wake_flows import pw_sleepy
from wayline._core.events import Event, EventType, NewEvent
from wayline.world import World


async def _worker(url: str, mark: Path, at_cancel: bool) -> None:
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, [pw_sleepy], settings=settings(prompt_wake_seconds=5.0))
        await worker.start()
        print("worker ready", flush=True)
        if at_cancel:
            _stop_at_cancel(world, mark)
            marked = asyncio.ensure_future(asyncio.sleep(0))
        else:
            marked = asyncio.ensure_future(_mark(worker, mark))
        try:
            await worker.run()
        finally:
            marked.cancel()


async def _mark(worker: wayline.Worker, mark: Path) -> None:
    while not worker.handler.prompt_wakes.prompt:  # noqa: ASYNC110 - a counter, no event
        await asyncio.sleep(0.01)
    mark.write_text("waiting")  # noqa: ASYNC240 - a tiny local marker file


def _stop_at_cancel(world: World, mark: Path) -> None:
    """The first write of a sleep's completion lands, then writes ``mark`` and never returns:
    the sleep's completion is stored, its delayed message not withdrawn (that comes after the
    write), the delivery still held and nothing after the wake begun."""
    append = world.append

    async def stopped(run_id: str, events: Sequence[NewEvent], **kwargs: Any) -> list[Event]:
        written = await append(run_id, events, **kwargs)
        if any(e.type is EventType.WAIT_COMPLETED for e in events):
            mark.write_text(run_id)  # noqa: ASYNC240 - a tiny local marker file
            await asyncio.Event().wait()  # until the test kills the process
        return written

    world.append = stopped  # type: ignore[method-assign]


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_worker(sys.argv[1], Path(sys.argv[2]), sys.argv[3:] == ["at-cancel"]))
