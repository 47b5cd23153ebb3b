"""A worker process for the crash tests that kill a worker at a point it reports through a
file: ``python -m tests.runtime.worker_proc KIND URL FILE`` serves KIND's workflow with KIND's
settings, prints ``worker ready``, writes to ``FILE`` what KIND watches for, and runs until
killed. The kinds:

- ``live-replay``: serves ``live_replay_flows.crashy`` with live replays kept, and writes how
  many wakes went on from a live replay as that changes; once ``FILE.ask`` exists, it writes
  ``FILE.kept`` when it next holds no delivery and keeps a replay;
- ``prompt-wake``: serves ``prompt_wake_flows.pw_sleepy`` with prompt wakes of up to 5 s, and
  writes ``waiting`` once it waits in process for a sleep of a run it drives;
- ``prompt-wake-at-cancel``: the same workflow and settings; once it wrote a sleep's
  completion, before it withdraws the sleep's delayed message, it writes the run's id and
  stops there for good."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import wayline
from tests.runtime.harness import settings
from wayline._core.events import Event, EventType, NewEvent

Watch = Callable[[wayline.Worker, Path], Awaitable[None]]


async def _count_hits(worker: wayline.Worker, hits: Path) -> None:
    seen = 0
    ask, kept = hits.with_name(f"{hits.name}.ask"), hits.with_name(f"{hits.name}.kept")
    while True:
        if worker.handler.replays.hits != seen:
            seen = worker.handler.replays.hits
            hits.write_text(str(seen))  # noqa: ASYNC240 - a tiny local marker file
        # looked at after the ask: a delivery in hand when the test asked has given its
        # replay back by now (``harness.holds_nothing``, across processes)
        idle = not worker._handlers and len(worker.handler.replays) > 0
        if idle and ask.exists() and not kept.exists():
            kept.write_text("kept")
        await asyncio.sleep(0.01)


async def _mark_prompt_wait(worker: wayline.Worker, mark: Path) -> None:
    while not worker.handler.prompt_wakes.prompt:  # noqa: ASYNC110 - a counter, no event
        await asyncio.sleep(0.01)
    mark.write_text("waiting")  # noqa: ASYNC240 - a tiny local marker file


async def _stop_at_cancel(worker: wayline.Worker, mark: Path) -> None:
    """The first write of a sleep's completion lands, then writes ``mark`` and never returns:
    the sleep's completion is stored, its delayed message not withdrawn (that comes after the
    write), the delivery still held and nothing after the wake begun."""
    world = worker.world
    append = world.append

    async def stopped(run_id: str, events: Sequence[NewEvent], **kwargs: Any) -> list[Event]:
        written = await append(run_id, events, **kwargs)
        if any(e.type is EventType.WAIT_COMPLETED for e in events):
            mark.write_text(run_id)  # noqa: ASYNC240 - a tiny local marker file
            await asyncio.Event().wait()  # until the test kills the process
        return written

    world.append = stopped  # type: ignore[method-assign]


def _kind(name: str) -> tuple[list[Any], dict[str, Any], Watch]:
    """KIND's workflows, settings and watch. Each flows module is imported only for its own
    kind, so a process registers no workflow its test does not serve."""
    if name == "live-replay":
        from tests.runtime.live_replay_flows import crashy

        return [crashy], {"replay_cache_runs": 256}, _count_hits
    if name == "prompt-wake":
        from tests.runtime.prompt_wake_flows import pw_sleepy

        return [pw_sleepy], {"prompt_wake_seconds": 5.0}, _mark_prompt_wait
    if name == "prompt-wake-at-cancel":
        from tests.runtime.prompt_wake_flows import pw_sleepy

        return [pw_sleepy], {"prompt_wake_seconds": 5.0}, _stop_at_cancel
    raise SystemExit(f"unknown kind {name!r}: live-replay, prompt-wake or prompt-wake-at-cancel")


async def _worker(kind: str, url: str, file: Path) -> None:
    workflows, options, watch = _kind(kind)
    async with wayline.open_world(url) as world:
        worker = wayline.Worker(world, workflows, settings=settings(**options))
        await worker.start()
        print("worker ready", flush=True)
        watching = asyncio.ensure_future(watch(worker, file))
        try:
            await worker.run()
        finally:
            watching.cancel()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_worker(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
