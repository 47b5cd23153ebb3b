"""The workload the power-cut tests drive, in processes that die in the cut:

``python -m tests.powercut.workload worker TARGET``
    serves ``powered`` until killed;
``python -m tests.powercut.workload driver TARGET ACKS BODIES RUNS STEPS``
    starts RUNS runs and writes one line to ACKS for every acknowledgement it sees: a start
    that returned, a step completion read from the run's events, a hook payload or a cancel
    the world accepted, a run's end. It resumes each run's hook and cancels every fourth run,
    then keeps reading until killed.

TARGET is a SQLite world URL or a ``nats://`` URL (servers and options, no prefix). Step
bodies append ``RUN STEP ATTEMPT`` to BODIES, a file outside the power-loss mount, so every
body that ran is counted whatever the cut kept."""

from __future__ import annotations

import asyncio
import logging
import sys

import wayline
from wayline._core.events import RUN_TERMINAL_EVENTS, EventType
from wayline.world import World

VISIBILITY = 2.0  # seconds: a dead consumer's JetStream delivery comes back this soon


@wayline.step
async def body(bodies: str, i: int) -> int:
    ctx = wayline.step_context()
    _append(bodies, f"{ctx.run_id} {ctx.step_id} {ctx.attempt}")
    return i


def _append(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line + "\n")


@wayline.workflow
async def powered(bodies: str, steps: int) -> int:
    total = 0
    for i in range(steps):
        total += await body(bodies, i)
        if i == steps // 2:
            total += int(await wayline.create_hook(hook_token(wayline.workflow_info().run_id)))
    return total


def hook_token(run_id: str) -> str:
    return f"pc:{run_id}"


def open_world(target: str) -> World:
    if target.startswith("nats://"):
        from wayline.worlds.nats import NatsWorld

        url = f"{target}{'&' if '?' in target else '?'}prefix=pc"
        return NatsWorld.from_url(url, visibility_seconds=VISIBILITY)
    return wayline.LocalWorld.from_url(target, poll_interval=0.02, visibility_seconds=VISIBILITY)


async def worker(target: str) -> None:
    async with open_world(target) as world:
        w = wayline.Worker(world, [powered])
        print("worker ready", flush=True)
        await w.run()


async def driver(target: str, acks_path: str, bodies: str, runs: int, steps: int) -> None:
    def ack(line: str) -> None:
        _append(acks_path, line)  # one write per line: the driver dies at any moment

    async with open_world(target) as world:
        client = wayline.Client(world)
        handles = []
        for _ in range(runs):
            handle = await client.start(powered, bodies, steps)
            ack(f"start {handle.run_id}")
            handles.append(handle)
        print("driver started", flush=True)
        seen: set[tuple[str, str]] = set()
        ended: set[str] = set()
        while True:
            for n, handle in enumerate(handles):
                run = handle.run_id
                if run in ended:
                    continue
                events = await handle.events()
                done = 0
                for e in events:
                    if e.type is EventType.STEP_COMPLETED:
                        done += 1
                        if (run, str(e.correlation_id)) not in seen:
                            seen.add((run, str(e.correlation_id)))
                            ack(f"step {run} {e.correlation_id}")
                    elif e.type is EventType.HOOK_CREATED and ("hook", run) not in seen:
                        seen.add(("hook", run))
                        try:
                            await client.resume_hook(hook_token(run), 1)
                        except wayline.HookNotFoundError:
                            continue  # the run was cancelled first: its hook is gone
                        ack(f"hook {run}")
                    elif e.type in RUN_TERMINAL_EVENTS:
                        ended.add(run)
                        ack(f"end {run} {e.type}")
                if n % 4 == 3 and done >= steps // 4 and ("cancel", run) not in seen:
                    seen.add(("cancel", run))
                    if await client.cancel(run):
                        ack(f"cancel {run}")
            await asyncio.sleep(0.02)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if sys.argv[1] == "worker":
        asyncio.run(worker(sys.argv[2]))
    else:
        target, acks_path, bodies, runs, steps = sys.argv[2:7]
        asyncio.run(driver(target, acks_path, bodies, int(runs), int(steps)))
